CREATE SCHEMA "approvals";
--> statement-breakpoint
CREATE TABLE "approvals"."approvals" (
	"id" text PRIMARY KEY NOT NULL,
	"workspace_id" text NOT NULL,
	"run_id" text NOT NULL,
	"step_id" text NOT NULL,
	"step" text NOT NULL,
	"workflow" text NOT NULL,
	"app" text NOT NULL,
	"tool" text NOT NULL,
	"args" jsonb,
	"risk" text,
	"policy" text,
	"summary" text,
	"context" jsonb,
	"escalates_to" text,
	"on_timeout" text DEFAULT 'escalate' NOT NULL,
	"status" text NOT NULL,
	"iteration" integer DEFAULT 0 NOT NULL,
	"requested_at" timestamp with time zone DEFAULT now() NOT NULL,
	"expires_at" timestamp with time zone,
	"decided_at" timestamp with time zone,
	"decided_by" text,
	"decided_via" text,
	"edited_args" jsonb
);
--> statement-breakpoint
CREATE TABLE "approvals"."outbox" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"subject" text NOT NULL,
	"msg_id" text NOT NULL,
	"payload" "bytea" NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"claimed_until" timestamp with time zone
);
--> statement-breakpoint
CREATE INDEX "approvals_ws_requested" ON "approvals"."approvals" USING btree ("workspace_id","requested_at" DESC NULLS LAST);--> statement-breakpoint
CREATE INDEX "approvals_expiry" ON "approvals"."approvals" USING btree ("expires_at");