CREATE TABLE "invoker"."inferences" (
	"run_id" text NOT NULL,
	"step_id" text NOT NULL,
	"workspace_id" text NOT NULL,
	"outcome" jsonb NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "inferences_run_id_step_id_pk" PRIMARY KEY("run_id","step_id")
);
