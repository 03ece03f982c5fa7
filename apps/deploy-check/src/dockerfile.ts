import { parse } from 'yaml';

/**
 * The Dockerfile's shape: several stages (dependencies built apart from the image that
 * runs), a final stage that runs as a non-root user, node --import tsx as the entrypoint
 * (what the chart's args and compose's commands assume), and the tsx it installs being
 * the lockfile's version.
 */

interface Instruction {
  op: string;
  args: string;
  line: number;
}

function instructions(text: string): Instruction[] {
  const out: Instruction[] = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const start = i;
    let line = lines[i] as string;
    if (/^\s*(#|$)/.test(line)) continue;
    // Continuation lines end with a backslash.
    while (/\\\s*$/.test(line) && i + 1 < lines.length) line = line.replace(/\\\s*$/, ' ') + (lines[++i] as string);
    const m = /^\s*([A-Za-z]+)\s+(.*)$/.exec(line);
    if (m) out.push({ op: (m[1] as string).toUpperCase(), args: (m[2] as string).trim(), line: start + 1 });
  }
  return out;
}

/** The tsx version pnpm-lock.yaml resolves for the root package. */
export function lockedTsxVersion(lockText: string): string | undefined {
  const lock = parse(lockText) as { importers?: Record<string, { devDependencies?: Record<string, { version?: string }> }> };
  return lock.importers?.['.']?.devDependencies?.tsx?.version?.replace(/\(.*$/, '');
}

export function checkDockerfile(text: string, lockText: string): string[] {
  const out: string[] = [];
  const ins = instructions(text);
  const froms = ins.filter((i) => i.op === 'FROM');
  if (froms.length < 2) out.push('not multi-stage: build dependencies in one stage, copy the result into the final one');
  const lastFrom = ins.lastIndexOf(froms[froms.length - 1] as Instruction);
  const final = ins.slice(lastFrom);
  const user = final.filter((i) => i.op === 'USER').pop();
  if (!user) out.push('the final stage sets no USER: it would run as root');
  else if (/^(root|0)(:|$)/.test(user.args)) out.push(`line ${user.line}: USER ${user.args} is root`);
  else if (!/^\d+(:\d+)?$/.test(user.args))
    out.push(`line ${user.line}: USER ${user.args}: use a numeric uid so Kubernetes can verify runAsNonRoot`);
  const entry = final.filter((i) => i.op === 'ENTRYPOINT').pop();
  if (!entry || entry.args !== '["node", "--import", "tsx"]')
    out.push(
      'the final stage\'s ENTRYPOINT must be ["node", "--import", "tsx"] (the chart and compose pass the service file as the argument)',
    );
  for (const f of froms) if (/:latest\b/.test(f.args)) out.push(`line ${f.line}: FROM ${f.args}: pin the base image`);
  if (final.some((i) => i.op === 'RUN' && /pnpm install(?![^&]*--prod)/.test(i.args)))
    out.push('the final stage installs dependencies: do it in a build stage');
  if (!final.some((i) => i.op === 'COPY' && /--from=/.test(i.args))) out.push('the final stage copies nothing from the build stage');
  const arg = ins.find((i) => i.op === 'ARG' && i.args.startsWith('TSX_VERSION='));
  const locked = lockedTsxVersion(lockText);
  if (!arg) out.push('no ARG TSX_VERSION');
  else if (!locked) out.push('pnpm-lock.yaml resolves no tsx for the root package');
  else if (arg.args !== `TSX_VERSION=${locked}`) out.push(`line ${arg.line}: ${arg.args}, but pnpm-lock.yaml has tsx ${locked}`);
  return out;
}
