DROP INDEX "approvals"."approvals_expiry";--> statement-breakpoint
DROP INDEX "approvals"."approvals_ws_requested";--> statement-breakpoint
ALTER TABLE "approvals"."approvals" ADD COLUMN "allow" text[] NOT NULL;--> statement-breakpoint
ALTER TABLE "approvals"."approvals" ADD COLUMN "response" text;--> statement-breakpoint
ALTER TABLE "approvals"."approvals" ADD COLUMN "timer_at" timestamp with time zone;--> statement-breakpoint
CREATE UNIQUE INDEX "approvals_run_step" ON "approvals"."approvals" USING btree ("workspace_id","run_id","step_id");--> statement-breakpoint
CREATE INDEX "approvals_timer" ON "approvals"."approvals" USING btree ("timer_at") WHERE timer_at is not null;--> statement-breakpoint
CREATE INDEX "approvals_open_by_run" ON "approvals"."approvals" USING btree ("run_id") WHERE status in ('pending', 'escalated');--> statement-breakpoint
CREATE INDEX "approvals_ws_requested" ON "approvals"."approvals" USING btree ("workspace_id","requested_at" DESC NULLS LAST,"id" DESC NULLS LAST);