ALTER TABLE "ingest"."schedules" ADD COLUMN "tags" text[];--> statement-breakpoint
ALTER TABLE "ingest"."schedules" ADD COLUMN "paused_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "ingest"."schedules" ADD COLUMN "paused_by" text;