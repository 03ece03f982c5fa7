CREATE TABLE "scheduler"."scores" (
	"run_id" text NOT NULL,
	"step_id" text NOT NULL,
	"workspace_id" text NOT NULL,
	"step" text NOT NULL,
	"name" text NOT NULL,
	"value" jsonb NOT NULL,
	"data" jsonb NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "scores_run_id_step_id_pk" PRIMARY KEY("run_id","step_id")
);
