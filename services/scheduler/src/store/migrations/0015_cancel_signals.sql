CREATE TABLE "scheduler"."cancel_signals" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"workspace_id" text NOT NULL,
	"app" text NOT NULL,
	"workflow" text NOT NULL,
	"event_id" text NOT NULL,
	"event_name" text NOT NULL,
	"event_data" text NOT NULL,
	"event_ts" timestamp with time zone NOT NULL,
	"if_expr" text DEFAULT '' NOT NULL,
	"within_ms" bigint DEFAULT 0 NOT NULL,
	"actor" text,
	"expires_at" timestamp with time zone NOT NULL
);
--> statement-breakpoint
CREATE INDEX "cancel_signals_workflow" ON "scheduler"."cancel_signals" USING btree ("workspace_id","app","workflow","event_ts");