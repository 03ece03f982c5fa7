ALTER TABLE "scheduler"."runs" ADD COLUMN "timeout_start_ms" bigint;--> statement-breakpoint
ALTER TABLE "scheduler"."runs" ADD COLUMN "timeout_finish_ms" bigint;--> statement-breakpoint
ALTER TABLE "scheduler"."workflows" ADD COLUMN "timeout_start_ms" bigint;--> statement-breakpoint
ALTER TABLE "scheduler"."workflows" ADD COLUMN "timeout_finish_ms" bigint;--> statement-breakpoint
CREATE INDEX "runs_timeouts" ON "scheduler"."runs" USING btree ("created_at") WHERE (timeout_start_ms is not null or timeout_finish_ms is not null) and status in ('queued', 'running', 'waiting', 'paused');