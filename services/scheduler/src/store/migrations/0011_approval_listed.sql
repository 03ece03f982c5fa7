ALTER TABLE "scheduler"."steps" ADD COLUMN "listed_at" timestamp with time zone;--> statement-breakpoint
-- Approvals parked before this version were listed without telling the scheduler: they keep their needs_attention state.
UPDATE "scheduler"."steps" SET "listed_at" = "created_at" WHERE "op" = 'Approval' AND "status" = 'waiting';
