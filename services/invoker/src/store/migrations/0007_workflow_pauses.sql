CREATE TABLE "invoker"."workflow_pauses" (
	"workspace_id" text NOT NULL,
	"app" text NOT NULL,
	"workflow" text NOT NULL,
	"paused_by" text NOT NULL,
	"paused_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "workflow_pauses_workspace_id_app_workflow_pk" PRIMARY KEY("workspace_id","app","workflow")
);
