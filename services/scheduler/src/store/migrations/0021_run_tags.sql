ALTER TABLE "scheduler"."runs" ADD COLUMN "tags" text[];--> statement-breakpoint
CREATE INDEX "runs_tags" ON "scheduler"."runs" USING gin ("tags") WHERE tags is not null;