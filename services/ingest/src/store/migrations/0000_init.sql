CREATE SCHEMA "ingest";
--> statement-breakpoint
CREATE TABLE "ingest"."events" (
	"id" text PRIMARY KEY NOT NULL,
	"workspace_id" text NOT NULL,
	"name" text NOT NULL,
	"app" text,
	"source" text NOT NULL,
	"data" text NOT NULL,
	"dedupe_id" text,
	"runner" text,
	"target_app" text,
	"woke" integer DEFAULT 0 NOT NULL,
	"triggered" jsonb NOT NULL,
	"received_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "ingest"."outbox" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"subject" text NOT NULL,
	"msg_id" text NOT NULL,
	"payload" "bytea" NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"claimed_until" timestamp with time zone
);
--> statement-breakpoint
CREATE TABLE "ingest"."triggers" (
	"workspace_id" text NOT NULL,
	"app" text NOT NULL,
	"workflow" text NOT NULL,
	"event" text NOT NULL,
	"is_prefix" boolean NOT NULL,
	"if_expr" text DEFAULT '' NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "triggers_workspace_id_app_workflow_event_is_prefix_if_expr_pk" PRIMARY KEY("workspace_id","app","workflow","event","is_prefix","if_expr")
);
--> statement-breakpoint
CREATE INDEX "events_ws_received" ON "ingest"."events" USING btree ("workspace_id","received_at" DESC NULLS LAST,"id" DESC NULLS LAST);--> statement-breakpoint
CREATE INDEX "events_ws_dedupe" ON "ingest"."events" USING btree ("workspace_id","app","dedupe_id","received_at");