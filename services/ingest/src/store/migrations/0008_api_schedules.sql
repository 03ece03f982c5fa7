CREATE TABLE "ingest"."schedules" (
	"id" text PRIMARY KEY NOT NULL,
	"workspace_id" text NOT NULL,
	"app" text NOT NULL,
	"workflow" text NOT NULL,
	"cron" text NOT NULL,
	"pattern" text NOT NULL,
	"tz" text NOT NULL,
	"data" text NOT NULL,
	"external_id" text,
	"next_at" timestamp with time zone,
	"last_at" timestamp with time zone,
	"created_by" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE INDEX "schedules_next" ON "ingest"."schedules" USING btree ("next_at");--> statement-breakpoint
CREATE INDEX "schedules_ws" ON "ingest"."schedules" USING btree ("workspace_id","created_at" DESC NULLS LAST,"id");--> statement-breakpoint
CREATE UNIQUE INDEX "schedules_external" ON "ingest"."schedules" USING btree ("workspace_id","app","workflow","external_id");