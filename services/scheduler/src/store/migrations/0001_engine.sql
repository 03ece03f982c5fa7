CREATE TABLE "scheduler"."control_actions" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"workspace_id" text NOT NULL,
	"action" text NOT NULL,
	"run_id" text,
	"new_run_id" text,
	"actor" text,
	"detail" jsonb,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "scheduler"."waiters" (
	"workspace_id" text NOT NULL,
	"event_name" text NOT NULL,
	"run_id" text NOT NULL,
	"step_id" text NOT NULL,
	"if_expr" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "waiters_run_id_step_id_pk" PRIMARY KEY("run_id","step_id")
);
--> statement-breakpoint
ALTER TABLE "scheduler"."frames" ADD COLUMN "log_key" text;--> statement-breakpoint
ALTER TABLE "scheduler"."runs" ADD COLUMN "wake_pending" boolean DEFAULT false NOT NULL;--> statement-breakpoint
ALTER TABLE "scheduler"."runs" ADD COLUMN "pause_requested" boolean DEFAULT false NOT NULL;--> statement-breakpoint
ALTER TABLE "scheduler"."runs" ADD COLUMN "parent_run_id" text;--> statement-breakpoint
ALTER TABLE "scheduler"."runs" ADD COLUMN "parent_step_id" text;--> statement-breakpoint
ALTER TABLE "scheduler"."runs" ADD COLUMN "on_failure_of" text;--> statement-breakpoint
ALTER TABLE "scheduler"."steps" ADD COLUMN "wake_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "scheduler"."steps" ADD COLUMN "child_run_id" text;--> statement-breakpoint
CREATE INDEX "control_ws_created" ON "scheduler"."control_actions" USING btree ("workspace_id","id");--> statement-breakpoint
CREATE INDEX "waiters_event" ON "scheduler"."waiters" USING btree ("workspace_id","event_name");--> statement-breakpoint
CREATE UNIQUE INDEX "frames_log_key" ON "scheduler"."frames" USING btree ("run_id","log_key");--> statement-breakpoint
CREATE INDEX "runs_ws_replay_of" ON "scheduler"."runs" USING btree ("workspace_id","replay_of");--> statement-breakpoint
CREATE INDEX "runs_parent" ON "scheduler"."runs" USING btree ("parent_run_id");