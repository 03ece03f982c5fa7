CREATE TABLE "invoker"."retention" (
	"workspace_id" text PRIMARY KEY NOT NULL,
	"days" integer NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE INDEX "inferences_ws_created" ON "invoker"."inferences" USING btree ("workspace_id","created_at");