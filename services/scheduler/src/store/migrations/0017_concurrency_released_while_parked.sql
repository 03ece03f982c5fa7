DROP INDEX "scheduler"."runs_due";--> statement-breakpoint
CREATE INDEX "runs_released_slot" ON "scheduler"."runs" USING btree ("lease_until") WHERE status = 'waiting' and not admitted;--> statement-breakpoint
CREATE INDEX "runs_due" ON "scheduler"."runs" USING btree ("lease_until") WHERE status in ('queued', 'running', 'waiting') and admitted;