CREATE TABLE "scheduler"."fork_keys" (
	"workspace_id" text NOT NULL,
	"key" text NOT NULL,
	"fingerprint" text NOT NULL,
	"new_run_id" text NOT NULL,
	"expires_at" timestamp with time zone NOT NULL,
	CONSTRAINT "fork_keys_workspace_id_key_pk" PRIMARY KEY("workspace_id","key")
);
--> statement-breakpoint
CREATE INDEX "fork_keys_expires" ON "scheduler"."fork_keys" USING btree ("expires_at");