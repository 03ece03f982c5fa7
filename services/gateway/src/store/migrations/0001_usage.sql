CREATE TABLE "gateway"."metered_runs" (
	"run_id" text PRIMARY KEY NOT NULL,
	"workspace_id" text NOT NULL,
	"month" text NOT NULL
);
--> statement-breakpoint
CREATE TABLE "gateway"."usage" (
	"workspace_id" text NOT NULL,
	"month" text NOT NULL,
	"runs" bigint DEFAULT 0 NOT NULL,
	CONSTRAINT "usage_workspace_id_month_pk" PRIMARY KEY("workspace_id","month")
);
--> statement-breakpoint
ALTER TABLE "gateway"."workspaces" ADD COLUMN "suspended_reason" text;--> statement-breakpoint
CREATE INDEX "metered_runs_month" ON "gateway"."metered_runs" USING btree ("month");--> statement-breakpoint
-- Suspensions from before reasons were kept were operators' (nothing else suspended then).
UPDATE "gateway"."workspaces" SET "suspended_reason" = 'operator' WHERE "suspended" AND "suspended_reason" IS NULL;
