-- The trigger rows become part of the workflows projection: carry registrations over (implicit triggers become explicit) so no runner has to re-register.
INSERT INTO "ingest"."workflows" ("workspace_id", "app", "name", "config")
SELECT "workspace_id", "app", "workflow",
       jsonb_build_object('name', "workflow", 'triggers', jsonb_agg(jsonb_strip_nulls(jsonb_build_object(
         'event', "event" || CASE WHEN "is_prefix" THEN '*' ELSE '' END, 'if', nullif("if_expr", '')))))
  FROM "ingest"."triggers" GROUP BY 1, 2, 3
ON CONFLICT DO NOTHING;--> statement-breakpoint
DROP TABLE "ingest"."triggers" CASCADE;
