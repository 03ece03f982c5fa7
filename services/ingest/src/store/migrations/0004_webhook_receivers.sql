CREATE TABLE "ingest"."receivers" (
	"id" text PRIMARY KEY NOT NULL,
	"workspace_id" text NOT NULL,
	"name" text,
	"app" text,
	"target_app" text,
	"slug" text NOT NULL,
	"event_name" text NOT NULL,
	"secret_sealed" text NOT NULL,
	"secret_key_id" text NOT NULL,
	"enabled" boolean DEFAULT true NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "ingest"."source_deliveries" (
	"id" text PRIMARY KEY NOT NULL,
	"workspace_id" text NOT NULL,
	"receiver_id" text NOT NULL,
	"slug" text NOT NULL,
	"outcome" text NOT NULL,
	"reason" text,
	"size_bytes" integer NOT NULL,
	"headers" jsonb NOT NULL,
	"event_id" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX "receivers_slug" ON "ingest"."receivers" USING btree ("slug");--> statement-breakpoint
CREATE INDEX "receivers_ws_created" ON "ingest"."receivers" USING btree ("workspace_id","created_at","id");--> statement-breakpoint
CREATE INDEX "source_deliveries_ws_created" ON "ingest"."source_deliveries" USING btree ("workspace_id","created_at" DESC NULLS LAST,"id" DESC NULLS LAST);