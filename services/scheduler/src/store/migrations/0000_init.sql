CREATE SCHEMA "scheduler";
--> statement-breakpoint
CREATE TABLE "scheduler"."frames" (
	"run_id" text NOT NULL,
	"seq" integer NOT NULL,
	"workspace_id" text NOT NULL,
	"kind" text NOT NULL,
	"payload" jsonb NOT NULL,
	"ts" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "frames_run_id_seq_pk" PRIMARY KEY("run_id","seq")
);
--> statement-breakpoint
CREATE TABLE "scheduler"."outbox" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"subject" text NOT NULL,
	"msg_id" text NOT NULL,
	"payload" "bytea" NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"claimed_until" timestamp with time zone
);
--> statement-breakpoint
CREATE TABLE "scheduler"."runs" (
	"id" text PRIMARY KEY NOT NULL,
	"workspace_id" text NOT NULL,
	"workflow" text NOT NULL,
	"app" text NOT NULL,
	"runner" text DEFAULT '' NOT NULL,
	"status" text NOT NULL,
	"trigger_kind" text NOT NULL,
	"event_id" text,
	"event_name" text,
	"replay_of" text,
	"input" text NOT NULL,
	"result" text,
	"error" jsonb,
	"attempt" integer DEFAULT 1 NOT NULL,
	"pass" bigint DEFAULT 0 NOT NULL,
	"step_count" integer DEFAULT 0 NOT NULL,
	"next_seq" integer DEFAULT 1 NOT NULL,
	"transport_failures" integer DEFAULT 0 NOT NULL,
	"no_runner_since" timestamp with time zone,
	"lease_owner" text,
	"lease_until" timestamp with time zone,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"started_at" timestamp with time zone,
	"ended_at" timestamp with time zone,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "scheduler"."steps" (
	"run_id" text NOT NULL,
	"step_id" text NOT NULL,
	"workspace_id" text NOT NULL,
	"name" text NOT NULL,
	"op" text NOT NULL,
	"idx" integer NOT NULL,
	"status" text NOT NULL,
	"data" text,
	"error" jsonb,
	"input" text,
	"attempts" integer DEFAULT 1 NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"ended_at" timestamp with time zone,
	CONSTRAINT "steps_run_id_step_id_pk" PRIMARY KEY("run_id","step_id")
);
--> statement-breakpoint
CREATE TABLE "scheduler"."workflows" (
	"workspace_id" text NOT NULL,
	"app" text NOT NULL,
	"name" text NOT NULL,
	"config" jsonb NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "workflows_workspace_id_app_name_pk" PRIMARY KEY("workspace_id","app","name")
);
--> statement-breakpoint
CREATE INDEX "runs_ws_created" ON "scheduler"."runs" USING btree ("workspace_id","created_at" DESC NULLS LAST,"id" DESC NULLS LAST);--> statement-breakpoint
CREATE INDEX "runs_ws_event" ON "scheduler"."runs" USING btree ("workspace_id","event_id");--> statement-breakpoint
CREATE INDEX "runs_due" ON "scheduler"."runs" USING btree ("lease_until") WHERE status in ('queued', 'running', 'waiting');