CREATE TABLE "ingest"."scheduled_events" (
	"id" text PRIMARY KEY NOT NULL,
	"workspace_id" text NOT NULL,
	"name" text NOT NULL,
	"app" text,
	"data" text NOT NULL,
	"dedupe_id" text,
	"runner" text,
	"target_app" text,
	"session" text,
	"actor" text NOT NULL,
	"key_kind" text NOT NULL,
	"via" text NOT NULL,
	"scheduled_for" timestamp with time zone NOT NULL,
	"due_at" timestamp with time zone NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE INDEX "scheduled_events_due" ON "ingest"."scheduled_events" USING btree ("due_at");--> statement-breakpoint
CREATE INDEX "scheduled_events_ws" ON "ingest"."scheduled_events" USING btree ("workspace_id","scheduled_for","id");--> statement-breakpoint
CREATE INDEX "scheduled_events_dedupe" ON "ingest"."scheduled_events" USING btree ("workspace_id","app","dedupe_id");