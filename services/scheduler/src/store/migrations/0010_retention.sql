CREATE TABLE "scheduler"."retention" (
	"workspace_id" text PRIMARY KEY NOT NULL,
	"days" integer NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE INDEX "control_ws_created_at" ON "scheduler"."control_actions" USING btree ("workspace_id","created_at");--> statement-breakpoint
CREATE INDEX "runs_ws_ended" ON "scheduler"."runs" USING btree ("workspace_id","ended_at") WHERE status in ('succeeded', 'failed', 'cancelled');--> statement-breakpoint
CREATE INDEX "runs_on_failure_of" ON "scheduler"."runs" USING btree ("on_failure_of") WHERE on_failure_of is not null;