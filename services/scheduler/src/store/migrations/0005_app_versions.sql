CREATE TABLE "scheduler"."app_versions" (
	"workspace_id" text NOT NULL,
	"app" text NOT NULL,
	"version" bigint NOT NULL,
	CONSTRAINT "app_versions_workspace_id_app_pk" PRIMARY KEY("workspace_id","app")
);
