ALTER TABLE "gateway"."usage" ADD COLUMN "model_tokens" double precision;--> statement-breakpoint
ALTER TABLE "gateway"."usage" ADD COLUMN "model_cost" double precision;