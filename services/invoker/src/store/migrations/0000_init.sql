CREATE SCHEMA "invoker";
--> statement-breakpoint
CREATE TABLE "invoker"."outbox" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"subject" text NOT NULL,
	"msg_id" text NOT NULL,
	"payload" "bytea" NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"claimed_until" timestamp with time zone
);
--> statement-breakpoint
CREATE TABLE "invoker"."runners" (
	"workspace_id" text NOT NULL,
	"id" text NOT NULL,
	"app" text NOT NULL,
	"url" text NOT NULL,
	"transport" text DEFAULT 'serve' NOT NULL,
	"runtime" text,
	"language" text,
	"version" text,
	"key_fingerprint" text,
	"workflows" text[] NOT NULL,
	"registered_at" timestamp with time zone DEFAULT now() NOT NULL,
	"last_seen" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "runners_workspace_id_id_pk" PRIMARY KEY("workspace_id","id")
);
--> statement-breakpoint
CREATE TABLE "invoker"."workflows" (
	"workspace_id" text NOT NULL,
	"app" text NOT NULL,
	"name" text NOT NULL,
	"config" jsonb NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "workflows_workspace_id_app_name_pk" PRIMARY KEY("workspace_id","app","name")
);
--> statement-breakpoint
CREATE TABLE "invoker"."workspaces" (
	"id" text PRIMARY KEY NOT NULL,
	"name" text NOT NULL,
	"signing_key_sealed" text NOT NULL,
	"suspended" boolean DEFAULT false NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE INDEX "runners_app" ON "invoker"."runners" USING btree ("workspace_id","app");