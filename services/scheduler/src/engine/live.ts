import type { Bus } from '@dws/bus';
import { subjects } from '@dws/runtime';
import type { ControlRun } from '../store/control.js';
import type { NewFrame } from '../store/runs.js';

const enc = new TextEncoder();

/** What a live frame names of its run. */
export interface LiveRun {
  id: string;
  workspaceId: string;
  /** The run's status once these frames are stored. */
  status: string;
  workflow: string;
  app: string;
}

/** A run locked for a control action, as its live frames name it, with the status the action gave it. */
export const liveRunOf = (run: ControlRun, status: string): LiveRun => ({ id: run.id, workspaceId: run.workspace_id, status, workflow: run.workflow, app: run.app });

/**
 * Frames just committed go live (best-effort: a run stream that misses one
 * rereads storage): each on the run's timeline, and a status change on the
 * workspace's run stream. Only after the commit that stored them. `again`:
 * frames published before, sent once more on the timeline ahead of these
 * (HeldRun.firstFramesAgain).
 */
export function publishFrames(bus: Bus, run: LiveRun, frames: NewFrame[], again: NewFrame[] = []): void {
  if (frames.length === 0) return;
  // Frames carry the ts they were stored with (stamped); the fallback is for none.
  const now = new Date().toISOString();
  const subject = subjects.runTimeline(run.workspaceId, run.id);
  let statusTs: string | undefined;
  const emit = (f: NewFrame) => bus.emit(subject, enc.encode(JSON.stringify({ kind: f.kind, seq: f.seq, ts: f.ts ?? now, runId: run.id, ...f.fields })));
  again.forEach(emit);
  for (const f of frames) {
    emit(f);
    if (f.kind === 'run_status') statusTs = f.ts ?? now;
  }
  if (statusTs !== undefined) {
    bus.emit(
      subjects.workspaceRuns(run.workspaceId),
      enc.encode(JSON.stringify({ kind: 'run_status', ts: statusTs, runId: run.id, status: run.status, workflow: run.workflow, app: run.app })),
    );
  }
}
