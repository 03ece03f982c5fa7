/**
 * The Dockerfile's shape: several stages (dependencies and bundles built apart from the
 * image that runs), a final stage that runs as a non-root user, plain `node` (with its flags) as
 * the entrypoint (the chart's args and compose's commands name a bundle, dist/...), the
 * bundles built by scripts/build.mjs in a stage and copied into the final one, no
 * tsx in the final stage, and a preloaded library (LD_PRELOAD) that the final stage puts
 * where it says (the loader only warns about a missing one, and the services would run
 * on another malloc than the one measured).
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

/**
 * The node flags `pnpm start:<service>` gives every service (package.json's
 * scripts, read as test-e2e's nodeFlagsOf reads them to start the fleet), or a
 * problem when the services' scripts disagree: the image must start them the
 * same way, or what was measured is not what runs.
 */
export function startFlags(scripts: Record<string, string>): string[] | string {
  const flags = new Set<string>();
  for (const [name, command] of Object.entries(scripts)) {
    const m = /(?:^|&& )node ((?:--\S+ )*)dist\/services\/[a-z-]+\/bin\.js$/.exec(command);
    if (name.startsWith('start:') && m) flags.add((m[1] as string).trim());
  }
  if (flags.size === 0) return "package.json has no start:<service> script that runs a service's bundle on node";
  if (flags.size > 1)
    return `package.json's start:<service> scripts give the services different node flags: ${[...flags].map((f) => `"${f}"`).join(', ')}`;
  return [...flags][0]!.split(' ').filter(Boolean);
}

/** An exec-form instruction's argv (a JSON array of strings), or undefined. */
function execForm(args: string): string[] | undefined {
  try {
    const v: unknown = JSON.parse(args);
    return Array.isArray(v) && v.every((a) => typeof a === 'string') ? (v as string[]) : undefined;
  } catch {
    return undefined;
  }
}

/** `scripts`: package.json's, whose start:<service> flags the entrypoint must give node (startFlags). */
export function checkDockerfile(text: string, scripts?: Record<string, string>): string[] {
  const out: string[] = [];
  const flags = scripts && startFlags(scripts);
  if (typeof flags === 'string') out.push(flags);
  const expectedFlags = Array.isArray(flags) ? flags : undefined;
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
  const argv = entry && execForm(entry.args);
  if (!entry || !argv || argv[0] !== 'node' || !argv.slice(1).every((a) => a.startsWith('--')))
    out.push(
      'the final stage\'s ENTRYPOINT must be ["node"], with node\'s own flags at most (the chart and compose pass the bundle, dist/services/<name>/bin.js, as the argument)',
    );
  else if (expectedFlags && argv.slice(1).join(' ') !== expectedFlags.join(' '))
    out.push(
      `line ${entry.line}: ENTRYPOINT ${entry.args}: node's flags must be those pnpm start:<service> gives the services (${expectedFlags.join(' ') || 'none'})`,
    );
  const cmd = final.filter((i) => i.op === 'CMD').pop();
  if (cmd && !/^\["dist\/services\/[a-z-]+\/bin\.js"\]$/.test(cmd.args))
    out.push(`line ${cmd.line}: CMD ${cmd.args}: the default must be a service's bundle, ["dist/services/<name>/bin.js"]`);
  for (const f of froms) if (/:latest\b/.test(f.args)) out.push(`line ${f.line}: FROM ${f.args}: pin the base image`);
  if (final.some((i) => i.op === 'RUN' && /pnpm install(?![^&]*--prod)/.test(i.args)))
    out.push('the final stage installs dependencies: do it in a build stage');
  if (!final.some((i) => i.op === 'COPY' && /--from=/.test(i.args))) out.push('the final stage copies nothing from the build stage');
  if (!ins.some((i) => i.op === 'RUN' && /node scripts\/build\.mjs|pnpm (run )?build\b/.test(i.args)))
    out.push('no stage builds the bundles (node scripts/build.mjs)');
  if (!final.some((i) => i.op === 'COPY' && /--from=\S+\s+\/app\/dist\s/.test(i.args)))
    out.push('the final stage does not copy the bundles (COPY --from=<stage> /app/dist ...)');
  for (const env of final.filter((i) => i.op === 'ENV')) {
    const preload = /(?:^|\s)LD_PRELOAD=(\S+)/.exec(env.args)?.[1];
    if (preload && !final.some((i) => i.op === 'RUN' && i.line < env.line && i.args.includes(preload)))
      out.push(`line ${env.line}: LD_PRELOAD=${preload}, but no RUN of the final stage before it puts that file there`);
  }
  for (const i of final)
    if (['RUN', 'COPY', 'ENTRYPOINT', 'CMD'].includes(i.op) && /\btsx\b/.test(i.args))
      out.push(`line ${i.line}: ${i.op} ${i.args}: the image runs bundles on plain node, without tsx`);
  return out;
}
