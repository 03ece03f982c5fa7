CREATE TABLE "invoker"."inference_cache" (
	"workspace_id" text NOT NULL,
	"key" text NOT NULL,
	"outcome" jsonb NOT NULL,
	"expires_at" timestamp with time zone NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "inference_cache_workspace_id_key_pk" PRIMARY KEY("workspace_id","key")
);
