CREATE TABLE "scheduler"."model_ceilings" (
	"workspace_id" text PRIMARY KEY NOT NULL,
	"tokens_per_month" double precision,
	"cost_per_month" double precision,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
