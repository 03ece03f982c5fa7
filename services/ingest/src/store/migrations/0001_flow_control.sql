CREATE TABLE "ingest"."batch_events" (
	"run_id" text NOT NULL,
	"seq" integer NOT NULL,
	"event_id" text NOT NULL,
	"name" text NOT NULL,
	"data" text NOT NULL,
	"ts_ms" bigint NOT NULL,
	CONSTRAINT "batch_events_run_id_seq_pk" PRIMARY KEY("run_id","seq")
);
--> statement-breakpoint
CREATE TABLE "ingest"."batches" (
	"workspace_id" text NOT NULL,
	"app" text NOT NULL,
	"workflow" text NOT NULL,
	"key" text NOT NULL,
	"run_id" text NOT NULL,
	"size" integer NOT NULL,
	"bytes" integer NOT NULL,
	"runner" text DEFAULT '' NOT NULL,
	"due_at" timestamp with time zone NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "batches_workspace_id_app_workflow_key_pk" PRIMARY KEY("workspace_id","app","workflow","key"),
	CONSTRAINT "batches_run_id_unique" UNIQUE("run_id")
);
--> statement-breakpoint
CREATE TABLE "ingest"."cron_schedules" (
	"workspace_id" text NOT NULL,
	"app" text NOT NULL,
	"workflow" text NOT NULL,
	"cron" text NOT NULL,
	"pattern" text NOT NULL,
	"tz" text NOT NULL,
	"next_at" timestamp with time zone NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "cron_schedules_workspace_id_app_workflow_cron_pk" PRIMARY KEY("workspace_id","app","workflow","cron")
);
--> statement-breakpoint
CREATE TABLE "ingest"."cron_ticks" (
	"workspace_id" text NOT NULL,
	"app" text NOT NULL,
	"workflow" text NOT NULL,
	"tick_at" timestamp with time zone NOT NULL,
	"cron" text NOT NULL,
	"run_id" text NOT NULL,
	"fired_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "cron_ticks_workspace_id_app_workflow_tick_at_pk" PRIMARY KEY("workspace_id","app","workflow","tick_at")
);
--> statement-breakpoint
CREATE TABLE "ingest"."debounces" (
	"workspace_id" text NOT NULL,
	"app" text NOT NULL,
	"workflow" text NOT NULL,
	"key" text NOT NULL,
	"run_id" text NOT NULL,
	"event_id" text NOT NULL,
	"event_name" text NOT NULL,
	"data" text NOT NULL,
	"runner" text DEFAULT '' NOT NULL,
	"due_at" timestamp with time zone NOT NULL,
	"deadline_at" timestamp with time zone,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "debounces_workspace_id_app_workflow_key_pk" PRIMARY KEY("workspace_id","app","workflow","key")
);
--> statement-breakpoint
CREATE TABLE "ingest"."gates" (
	"workspace_id" text NOT NULL,
	"app" text NOT NULL,
	"workflow" text NOT NULL,
	"kind" text NOT NULL,
	"key" text NOT NULL,
	"tat_ms" bigint NOT NULL,
	"now_ms" bigint NOT NULL,
	CONSTRAINT "gates_workspace_id_app_workflow_kind_key_pk" PRIMARY KEY("workspace_id","app","workflow","kind","key")
);
--> statement-breakpoint
CREATE TABLE "ingest"."idempotency_keys" (
	"workspace_id" text NOT NULL,
	"app" text NOT NULL,
	"workflow" text NOT NULL,
	"key" text NOT NULL,
	"run_id" text NOT NULL,
	"expires_at" timestamp with time zone NOT NULL,
	CONSTRAINT "idempotency_keys_workspace_id_app_workflow_key_pk" PRIMARY KEY("workspace_id","app","workflow","key")
);
--> statement-breakpoint
CREATE TABLE "ingest"."singletons" (
	"workspace_id" text NOT NULL,
	"app" text NOT NULL,
	"workflow" text NOT NULL,
	"key" text NOT NULL,
	"run_id" text NOT NULL,
	"claimed_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "singletons_workspace_id_app_workflow_key_pk" PRIMARY KEY("workspace_id","app","workflow","key")
);
--> statement-breakpoint
CREATE TABLE "ingest"."workflows" (
	"workspace_id" text NOT NULL,
	"app" text NOT NULL,
	"name" text NOT NULL,
	"config" jsonb NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "workflows_workspace_id_app_name_pk" PRIMARY KEY("workspace_id","app","name")
);
--> statement-breakpoint
CREATE TABLE "ingest"."workspaces" (
	"id" text PRIMARY KEY NOT NULL,
	"suspended" boolean DEFAULT false NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE INDEX "batches_due" ON "ingest"."batches" USING btree ("due_at");--> statement-breakpoint
CREATE INDEX "cron_schedules_next" ON "ingest"."cron_schedules" USING btree ("next_at");--> statement-breakpoint
CREATE INDEX "cron_ticks_fired" ON "ingest"."cron_ticks" USING btree ("fired_at");--> statement-breakpoint
CREATE INDEX "debounces_due" ON "ingest"."debounces" USING btree ("due_at");--> statement-breakpoint
CREATE INDEX "gates_tat" ON "ingest"."gates" USING btree ("tat_ms");--> statement-breakpoint
CREATE INDEX "idempotency_expires" ON "ingest"."idempotency_keys" USING btree ("expires_at");