DROP INDEX "scheduler"."frames_log_key";--> statement-breakpoint
CREATE UNIQUE INDEX "frames_log_key" ON "scheduler"."frames" USING btree ("run_id","log_key") WHERE log_key is not null;--> statement-breakpoint
-- Room on each page for HOT updates: a pass that only advances the run rewrites no index.
ALTER TABLE "scheduler"."runs" SET (fillfactor = 80);
