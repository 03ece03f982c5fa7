ALTER TABLE "webhook_dispatcher"."deliveries" ADD COLUMN "claim" text;--> statement-breakpoint
ALTER TABLE "webhook_dispatcher"."endpoints" ADD COLUMN "seal_key_id" text DEFAULT '' NOT NULL;--> statement-breakpoint
ALTER TABLE "webhook_dispatcher"."endpoints" ADD COLUMN "updated_at" timestamp with time zone DEFAULT now() NOT NULL;--> statement-breakpoint
CREATE INDEX "attempts_delivery" ON "webhook_dispatcher"."attempts" USING btree ("delivery_id","attempt");--> statement-breakpoint
CREATE INDEX "deliveries_endpoint_created" ON "webhook_dispatcher"."deliveries" USING btree ("endpoint_id","created_at");--> statement-breakpoint
CREATE INDEX "endpoints_ws_created" ON "webhook_dispatcher"."endpoints" USING btree ("workspace_id","created_at");