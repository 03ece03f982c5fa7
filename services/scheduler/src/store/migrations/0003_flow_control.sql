ALTER TABLE "scheduler"."runs" ADD COLUMN "concurrency_key" text;--> statement-breakpoint
ALTER TABLE "scheduler"."runs" ADD COLUMN "concurrency_limit" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "scheduler"."runs" ADD COLUMN "admitted" boolean DEFAULT true NOT NULL;--> statement-breakpoint
ALTER TABLE "scheduler"."runs" ADD COLUMN "priority" bigint DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "scheduler"."runs" ADD COLUMN "singleton_key" text;--> statement-breakpoint
CREATE INDEX "runs_awaiting_slot" ON "scheduler"."runs" USING btree ("workspace_id","app","workflow","concurrency_key") WHERE status = 'queued' and not admitted;--> statement-breakpoint
CREATE INDEX "runs_slot_holders" ON "scheduler"."runs" USING btree ("workspace_id","app","workflow","concurrency_key") WHERE concurrency_limit > 0 and admitted and status in ('queued', 'running', 'waiting', 'paused');--> statement-breakpoint
CREATE INDEX "runs_singleton" ON "scheduler"."runs" USING btree ("workspace_id","app","workflow","singleton_key") WHERE singleton_key is not null;