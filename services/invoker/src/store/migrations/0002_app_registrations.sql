CREATE TABLE "invoker"."app_registrations" (
	"workspace_id" text NOT NULL,
	"app" text NOT NULL,
	"version" bigint NOT NULL,
	"digest" text NOT NULL,
	CONSTRAINT "app_registrations_workspace_id_app_pk" PRIMARY KEY("workspace_id","app")
);
