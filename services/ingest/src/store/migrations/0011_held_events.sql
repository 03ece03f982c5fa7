CREATE TABLE "ingest"."held_events" (
	"seq" bigserial PRIMARY KEY NOT NULL,
	"workspace_id" text NOT NULL,
	"app" text NOT NULL,
	"workflow" text NOT NULL,
	"event_id" text NOT NULL,
	"session" text,
	"held_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX "held_events_match" ON "ingest"."held_events" USING btree ("workspace_id","app","workflow","event_id");