CREATE TABLE "ingest"."app_versions" (
	"workspace_id" text NOT NULL,
	"app" text NOT NULL,
	"version" bigint NOT NULL,
	CONSTRAINT "app_versions_workspace_id_app_pk" PRIMARY KEY("workspace_id","app")
);
--> statement-breakpoint
CREATE TABLE "ingest"."index_versions" (
	"workspace_id" text PRIMARY KEY NOT NULL,
	"version" bigint NOT NULL
);
