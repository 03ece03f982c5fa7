import { createHash } from 'node:crypto';
import { stringify } from 'yaml';

/**
 * A Go text/template engine for the subset deploy/helm/dws uses, with the Helm and
 * Sprig functions it calls. Anything outside the subset is an error, never a guess,
 * so a template that strays from it fails the check instead of rendering wrongly.
 */

export class TemplateError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'TemplateError';
  }
}

// ---------- syntax ----------

type Expr =
  | { kind: 'dot' }
  | { kind: 'field'; base: Expr; name: string }
  | { kind: 'var'; name: string }
  | { kind: 'literal'; value: unknown }
  | { kind: 'ident'; name: string }
  | { kind: 'pipe'; pipeline: Pipeline };

interface Command {
  args: Expr[];
}

interface Pipeline {
  decl?: { names: string[]; assign: boolean };
  cmds: Command[];
  line: number;
}

type Node =
  | { kind: 'text'; text: string }
  | { kind: 'action'; pipeline: Pipeline }
  | { kind: 'if'; branches: { cond: Pipeline; body: Node[] }[]; otherwise: Node[] }
  | { kind: 'range'; pipeline: Pipeline; body: Node[]; otherwise: Node[] }
  | { kind: 'with'; pipeline: Pipeline; body: Node[]; otherwise: Node[] }
  | { kind: 'template'; name: string; pipeline?: Pipeline; line: number };

type Token =
  | { t: 'ident'; v: string }
  | { t: 'field'; v: string; attached: boolean }
  | { t: 'dot' }
  | { t: 'var'; v: string }
  | { t: 'string'; v: string }
  | { t: 'number'; v: number }
  | { t: 'lparen' }
  | { t: 'rparen' }
  | { t: 'pipe' }
  | { t: 'declare' }
  | { t: 'assign' }
  | { t: 'comma' };

interface RawAction {
  tokens: Token[];
  line: number;
}

type Piece = { kind: 'text'; text: string } | { kind: 'action'; action: RawAction };

const KEYWORDS = new Set(['if', 'else', 'end', 'range', 'with', 'define', 'template', 'block', 'break', 'continue']);

/** Splits a source into text and actions, applying the `{{-` and `-}}` trim markers. */
function scan(src: string, file: string): Piece[] {
  const pieces: Piece[] = [];
  let pos = 0;
  let trimNext = false;
  const lineAt = (i: number) => src.slice(0, i).split('\n').length;
  while (pos <= src.length) {
    const open = src.indexOf('{{', pos);
    let text = open === -1 ? src.slice(pos) : src.slice(pos, open);
    if (trimNext) text = text.replace(/^\s+/, '');
    trimNext = false;
    if (open === -1) {
      if (text) pieces.push({ kind: 'text', text });
      break;
    }
    let i = open + 2;
    // A trim marker is "-" followed by white space; "{{-3}}" is the number -3.
    if (src[i] === '-' && /\s/.test(src[i + 1] ?? '')) {
      text = text.replace(/\s+$/, '');
      i += 2;
    }
    if (text) pieces.push({ kind: 'text', text });
    const line = lineAt(open);
    const rest = src.slice(i).replace(/^\s*/, '');
    if (rest.startsWith('/*')) {
      const startOfComment = src.indexOf('/*', i);
      const endOfComment = src.indexOf('*/', startOfComment + 2);
      if (endOfComment === -1) throw new TemplateError(`${file}:${line}: unclosed comment`);
      const m = /^(\s*-)?\s*}}/.exec(src.slice(endOfComment + 2));
      if (!m) throw new TemplateError(`${file}:${line}: comment must end with */}}`);
      if (m[1]) trimNext = true;
      pos = endOfComment + 2 + m[0].length;
      continue;
    }
    const { tokens, end, trimAfter } = lex(src, i, file, line);
    pieces.push({ kind: 'action', action: { tokens, line } });
    trimNext = trimAfter;
    pos = end;
  }
  return pieces;
}

/** Tokens of one action starting at `start`; returns where the text after `}}` begins. */
function lex(src: string, start: number, file: string, line: number): { tokens: Token[]; end: number; trimAfter: boolean } {
  const tokens: Token[] = [];
  let i = start;
  const fail = (msg: string): never => {
    throw new TemplateError(`${file}:${line}: ${msg}`);
  };
  for (;;) {
    if (i >= src.length) fail('unclosed action');
    const c = src[i] as string;
    if (/\s/.test(c)) {
      // " -}}" closes with a trim marker.
      const m = /^\s+-}}/.exec(src.slice(i));
      if (m) return { tokens, end: i + m[0].length, trimAfter: true };
      i++;
      continue;
    }
    if (src.startsWith('}}', i)) return { tokens, end: i + 2, trimAfter: false };
    if (c === '(') (tokens.push({ t: 'lparen' }), i++);
    else if (c === ')') (tokens.push({ t: 'rparen' }), i++);
    else if (c === '|') (tokens.push({ t: 'pipe' }), i++);
    else if (c === ',') (tokens.push({ t: 'comma' }), i++);
    else if (src.startsWith(':=', i)) (tokens.push({ t: 'declare' }), (i += 2));
    else if (c === '=') (tokens.push({ t: 'assign' }), i++);
    else if (c === '"') {
      let j = i + 1;
      let out = '';
      while (j < src.length && src[j] !== '"') {
        if (src[j] === '\n') fail('newline in string');
        if (src[j] === '\\') {
          const e = src[j + 1];
          const map: Record<string, string> = { n: '\n', t: '\t', r: '\r', '\\': '\\', '"': '"' };
          if (e === undefined || !(e in map)) fail(`unsupported escape \\${e ?? ''}`);
          out += map[e as string];
          j += 2;
        } else out += src[j++];
      }
      if (j >= src.length) fail('unterminated string');
      tokens.push({ t: 'string', v: out });
      i = j + 1;
    } else if (c === '`') {
      const j = src.indexOf('`', i + 1);
      if (j === -1) fail('unterminated raw string');
      tokens.push({ t: 'string', v: src.slice(i + 1, j) });
      i = j + 1;
    } else if (c === '.' || c === '$') {
      const m = /^(\$[A-Za-z0-9_]*|\.[A-Za-z_][A-Za-z0-9_]*|\.)/.exec(src.slice(i)) as RegExpExecArray;
      const s = m[0];
      if (s === '.') tokens.push({ t: 'dot' });
      else if (s.startsWith('$')) tokens.push({ t: 'var', v: s });
      // ".a.b" and "(x).a" chain; ".a .b" are two operands.
      else tokens.push({ t: 'field', v: s.slice(1), attached: i > start && /[\w)$]/.test(src[i - 1] as string) });
      i += s.length;
    } else if (/[-0-9]/.test(c)) {
      const m = /^-?\d+(\.\d+)?/.exec(src.slice(i));
      if (!m) fail(`unexpected "${c}"`);
      tokens.push({ t: 'number', v: Number((m as RegExpExecArray)[0]) });
      i += (m as RegExpExecArray)[0].length;
    } else if (/[A-Za-z_]/.test(c)) {
      const m = /^[A-Za-z_][A-Za-z0-9_]*/.exec(src.slice(i)) as RegExpExecArray;
      tokens.push({ t: 'ident', v: m[0] });
      i += m[0].length;
    } else fail(`unexpected "${c}"`);
  }
}

class Parser {
  private pos = 0;
  readonly defines = new Map<string, Node[]>();

  constructor(
    private readonly pieces: Piece[],
    private readonly file: string,
  ) {}

  parseFile(): Node[] {
    const { nodes, stop } = this.parseList();
    if (stop) throw this.err(stop.line, `unexpected {{${stop.word}}}`);
    return nodes;
  }

  private err(line: number, msg: string): TemplateError {
    return new TemplateError(`${this.file}:${line}: ${msg}`);
  }

  /** Nodes up to an `else` or `end` (returned as `stop`, consumed) or the end of input. */
  private parseList(): { nodes: Node[]; stop?: { word: 'else' | 'end'; rest: Token[]; line: number } } {
    const nodes: Node[] = [];
    while (this.pos < this.pieces.length) {
      const piece = this.pieces[this.pos++] as Piece;
      if (piece.kind === 'text') {
        nodes.push({ kind: 'text', text: piece.text });
        continue;
      }
      const { tokens, line } = piece.action;
      const head = tokens[0];
      const word = head?.t === 'ident' && KEYWORDS.has(head.v) ? head.v : undefined;
      if (word === 'end' || word === 'else') return { nodes, stop: { word, rest: tokens.slice(1), line } };
      if (word === 'if') nodes.push(this.parseIf(tokens.slice(1), line));
      else if (word === 'range' || word === 'with') {
        const pipeline = this.parsePipeline(tokens.slice(1), line, word === 'range');
        const { body, otherwise } = this.parseBody(word, line);
        nodes.push({ kind: word, pipeline, body, otherwise });
      } else if (word === 'define') {
        const name = tokens[1];
        if (tokens.length !== 2 || name?.t !== 'string') throw this.err(line, 'define takes one quoted name');
        const { nodes: body, stop } = this.parseList();
        if (stop?.word !== 'end' || stop.rest.length) throw this.err(line, `define "${name.v}" needs a plain {{end}}`);
        this.defines.set(name.v, body);
      } else if (word === 'template') {
        const name = tokens[1];
        if (name?.t !== 'string') throw this.err(line, 'template takes a quoted name');
        const rest = tokens.slice(2);
        nodes.push({ kind: 'template', name: name.v, line, ...(rest.length ? { pipeline: this.parsePipeline(rest, line, false) } : {}) });
      } else if (word) throw this.err(line, `{{${word}}} is outside the supported template subset`);
      else nodes.push({ kind: 'action', pipeline: this.parsePipeline(tokens, line, false) });
    }
    return { nodes };
  }

  private parseBody(word: string, line: number): { body: Node[]; otherwise: Node[] } {
    const { nodes: body, stop } = this.parseList();
    if (!stop) throw this.err(line, `{{${word}}} without {{end}}`);
    if (stop.word === 'end') return { body, otherwise: [] };
    if (stop.rest.length) throw this.err(stop.line, `{{else ${word === 'if' ? 'if' : '...'}}} is only supported after if`);
    const { nodes: otherwise, stop: end } = this.parseList();
    if (end?.word !== 'end') throw this.err(line, `{{${word}}} without {{end}}`);
    return { body, otherwise };
  }

  private parseIf(tokens: Token[], line: number): Node {
    const branches: { cond: Pipeline; body: Node[] }[] = [];
    let cond = this.parsePipeline(tokens, line, false);
    for (;;) {
      const { nodes, stop } = this.parseList();
      if (!stop) throw this.err(line, '{{if}} without {{end}}');
      branches.push({ cond, body: nodes });
      if (stop.word === 'end') return { kind: 'if', branches, otherwise: [] };
      const next = stop.rest[0];
      if (next?.t === 'ident' && next.v === 'if') {
        cond = this.parsePipeline(stop.rest.slice(1), stop.line, false);
        continue;
      }
      if (stop.rest.length) throw this.err(stop.line, 'unsupported {{else ...}}');
      const { nodes: otherwise, stop: end } = this.parseList();
      if (end?.word !== 'end' || end.rest.length) throw this.err(line, '{{if}} without {{end}}');
      return { kind: 'if', branches, otherwise };
    }
  }

  parsePipeline(tokens: Token[], line: number, allowTwoVars: boolean): Pipeline {
    let i = 0;
    const pipeline: Pipeline = { cmds: [], line };
    // "$a := ...", "$a = ...", or in range "$k, $v := ...".
    const names: string[] = [];
    let j = 0;
    while (tokens[j]?.t === 'var') {
      names.push((tokens[j] as { v: string }).v);
      if (tokens[j + 1]?.t === 'comma') j += 2;
      else {
        j += 1;
        break;
      }
    }
    const op = tokens[j];
    if (names.length && (op?.t === 'declare' || op?.t === 'assign')) {
      if (names.length > (allowTwoVars ? 2 : 1)) throw this.err(line, 'too many variables in declaration');
      pipeline.decl = { names, assign: op.t === 'assign' };
      i = j + 1;
    }
    const end = tokens.length;
    const parseCmds = (): Command[] => {
      const cmds: Command[] = [];
      let args: Expr[] = [];
      for (;;) {
        const tok = tokens[i];
        if (i >= end || tok?.t === 'rparen') break;
        if (tok?.t === 'pipe') {
          if (!args.length) throw this.err(line, 'empty command in pipeline');
          cmds.push({ args });
          args = [];
          i++;
          continue;
        }
        args.push(parseOperand());
      }
      if (!args.length) throw this.err(line, 'missing value in pipeline');
      cmds.push({ args });
      return cmds;
    };
    const parseOperand = (): Expr => {
      const tok = tokens[i++] as Token;
      let expr: Expr;
      switch (tok.t) {
        case 'dot':
          expr = { kind: 'dot' };
          break;
        case 'field':
          expr = { kind: 'field', base: { kind: 'dot' }, name: tok.v };
          break;
        case 'var':
          expr = { kind: 'var', name: tok.v };
          break;
        case 'string':
          expr = { kind: 'literal', value: tok.v };
          break;
        case 'number':
          expr = { kind: 'literal', value: tok.v };
          break;
        case 'ident':
          if (tok.v === 'true' || tok.v === 'false') expr = { kind: 'literal', value: tok.v === 'true' };
          else if (tok.v === 'nil') expr = { kind: 'literal', value: null };
          else if (KEYWORDS.has(tok.v)) throw this.err(line, `unexpected keyword ${tok.v}`);
          else expr = { kind: 'ident', name: tok.v };
          break;
        case 'lparen': {
          const inner: Pipeline = { cmds: parseCmds(), line };
          if (tokens[i]?.t !== 'rparen') throw this.err(line, 'unclosed (');
          i++;
          expr = { kind: 'pipe', pipeline: inner };
          break;
        }
        default:
          throw this.err(line, `unexpected ${tok.t}`);
      }
      // A field chain may follow a variable or a parenthesised pipeline: $x.a.b, (...).a
      for (let next = tokens[i]; next?.t === 'field' && next.attached; next = tokens[i]) {
        if (expr.kind === 'ident' || expr.kind === 'literal') throw this.err(line, `unexpected .${next.v}`);
        expr = { kind: 'field', base: expr, name: next.v };
        i++;
      }
      return expr;
    };
    pipeline.cmds = parseCmds();
    if (i < end) throw this.err(line, 'unexpected )');
    return pipeline;
  }
}

/** Parses one source; its defines are returned separately (they are global in Helm). */
export function parseTemplate(src: string, file: string): { nodes: Node[]; defines: Map<string, Node[]> } {
  const parser = new Parser(scan(src, file), file);
  const nodes = parser.parseFile();
  return { nodes, defines: parser.defines };
}

// ---------- values ----------

type Dict = Record<string, unknown>;

function isDict(v: unknown): v is Dict {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Go's truth: false, 0, nil and empty strings, lists and maps are false. */
export function truthy(v: unknown): boolean {
  if (v === null || v === undefined || v === false || v === 0 || v === '') return false;
  if (Array.isArray(v)) return v.length > 0;
  if (isDict(v)) return Object.keys(v).length > 0;
  return true;
}

/** fmt.Sprint of one value, as Go prints it (nil as "<nil>"). */
function goString(v: unknown): string {
  if (v === null || v === undefined) return '<nil>';
  if (typeof v === 'string') return v;
  if (typeof v === 'number') return goFloat(v);
  if (typeof v === 'boolean') return String(v);
  if (Array.isArray(v)) return `[${v.map(goString).join(' ')}]`;
  if (isDict(v))
    return `map[${Object.keys(v)
      .sort()
      .map((k) => `${k}:${goString(v[k])}`)
      .join(' ')}]`;
  return String(v);
}

/**
 * fmt's %v of a float64, which every number in helm's values is: shortest digits, and
 * an exponent from 1e+06 up (helm renders a value of 1000000 as "1e+06").
 */
function goFloat(n: number): string {
  if (!Number.isFinite(n)) return Number.isNaN(n) ? 'NaN' : n > 0 ? '+Inf' : '-Inf';
  if (n === 0) return '0';
  const [mantissa, e] = n.toExponential().split('e') as [string, string];
  const exp = Number(e);
  if (exp >= -4 && exp < 6) return String(n);
  return `${mantissa}e${exp < 0 ? '-' : '+'}${String(Math.abs(exp)).padStart(2, '0')}`;
}

/** strconv.Quote for the characters YAML and JSON care about. */
function goQuote(s: string): string {
  let out = '"';
  for (const ch of s) {
    const c = ch.codePointAt(0) as number;
    if (ch === '"' || ch === '\\') out += '\\' + ch;
    else if (ch === '\n') out += '\\n';
    else if (ch === '\t') out += '\\t';
    else if (ch === '\r') out += '\\r';
    else if (c < 0x20 || c === 0x7f) out += '\\x' + c.toString(16).padStart(2, '0');
    else out += ch;
  }
  return out + '"';
}

function sprintf(format: string, args: unknown[]): string {
  let n = 0;
  return format.replace(/%([%sdvq])/g, (_m, verb: string) => {
    if (verb === '%') return '%';
    if (n >= args.length) return `%!${verb}(MISSING)`;
    const a = args[n++];
    if (verb === 'd') return typeof a === 'number' && Number.isInteger(a) ? String(a) : `%!d(${goString(a)})`;
    if (verb === 'q') return goQuote(goString(a));
    return goString(a);
  });
}

/** fmt.Sprint: a space between operands when neither is a string. */
function goSprint(args: unknown[]): string {
  let out = '';
  args.forEach((a, i) => {
    if (i > 0 && typeof a !== 'string' && typeof args[i - 1] !== 'string') out += ' ';
    out += goString(a);
  });
  return out;
}

/** Helm's toYaml: sorted keys, YAML 1.1 quoting (as helm's go-yaml), no trailing newline. */
export function toYaml(v: unknown): string {
  return stringify(v ?? null, { version: '1.1', sortMapEntries: true, lineWidth: 0 }).replace(/\n$/, '');
}

function indent(n: number, s: string): string {
  const pad = ' '.repeat(n);
  return pad + s.replaceAll('\n', '\n' + pad);
}

function compare(a: unknown, b: unknown): boolean {
  const basic = (v: unknown) => v === null || v === undefined || ['string', 'number', 'boolean'].includes(typeof v);
  if (!basic(a) || !basic(b)) throw new TemplateError('error calling eq: non-comparable type');
  if (a === null || a === undefined || b === null || b === undefined) return (a ?? null) === (b ?? null);
  if (typeof a !== typeof b) throw new TemplateError(`error calling eq: incompatible types for comparison (${typeof a}, ${typeof b})`);
  return a === b;
}

// ---------- execution ----------

interface Scope {
  vars: { name: string; value: unknown }[];
}

export interface ExecContext {
  /** Named templates: defines, and each file under its path. */
  templates: Map<string, Node[]>;
  /** Name of the template being executed, for messages. */
  file: string;
  /** Bounds include recursion. */
  depth: number;
}

type Fn = (ctx: ExecContext, line: number, args: unknown[]) => unknown;

const nargs = (name: string, args: unknown[], n: number) => {
  if (args.length !== n) throw new TemplateError(`wrong number of args for ${name}: want ${n} got ${args.length}`);
};
const str = (name: string, v: unknown): string => {
  if (typeof v !== 'string') throw new TemplateError(`${name}: expected a string, got ${goString(v)}`);
  return v;
};
const int = (name: string, v: unknown): number => {
  if (typeof v !== 'number' || !Number.isInteger(v)) throw new TemplateError(`${name}: expected an integer, got ${goString(v)}`);
  return v;
};

const FUNCTIONS: Record<string, Fn> = {
  include: (ctx, _line, args) => {
    nargs('include', args, 2);
    return executeNamed(ctx, str('include', args[0]), args[1]);
  },
  required: (ctx, line, args) => {
    nargs('required', args, 2);
    const v = args[1];
    if (v === null || v === undefined || v === '')
      throw new TemplateError(`execution error at (${ctx.file}:${line}): ${str('required', args[0])}`);
    return v;
  },
  fail: (ctx, line, args) => {
    nargs('fail', args, 1);
    throw new TemplateError(`execution error at (${ctx.file}:${line}): ${str('fail', args[0])}`);
  },
  toYaml: (_c, _l, args) => (nargs('toYaml', args, 1), toYaml(args[0])),
  indent: (_c, _l, args) => (nargs('indent', args, 2), indent(int('indent', args[0]), goString(args[1]))),
  nindent: (_c, _l, args) => (nargs('nindent', args, 2), '\n' + indent(int('nindent', args[0]), goString(args[1]))),
  quote: (_c, _l, args) =>
    args
      .filter((a) => a !== null && a !== undefined)
      .map((a) => goQuote(goString(a)))
      .join(' '),
  default: (_c, _l, args) => {
    if (args.length < 1 || args.length > 2) throw new TemplateError('wrong number of args for default');
    return args.length === 2 && truthy(args[1]) ? args[1] : args[0];
  },
  printf: (_c, _l, args) => sprintf(str('printf', args[0]), args.slice(1)),
  print: (_c, _l, args) => goSprint(args),
  toString: (_c: ExecContext, _l: number, args: unknown[]) => (nargs('toString', args, 1), goString(args[0])),
  b64enc: (_c, _l, args) => (nargs('b64enc', args, 1), Buffer.from(goString(args[0]), 'utf8').toString('base64')),
  sha256sum: (_c, _l, args) => (nargs('sha256sum', args, 1), createHash('sha256').update(goString(args[0])).digest('hex')),
  trunc: (_c, _l, args) => {
    nargs('trunc', args, 2);
    const n = int('trunc', args[0]);
    const s = goString(args[1]);
    if (n < 0 && s.length + n > 0) return s.slice(s.length + n);
    return n >= 0 && s.length > n ? s.slice(0, n) : s;
  },
  trimSuffix: (_c, _l, args) => {
    nargs('trimSuffix', args, 2);
    const suffix = str('trimSuffix', args[0]);
    const s = goString(args[1]);
    return suffix && s.endsWith(suffix) ? s.slice(0, -suffix.length) : s;
  },
  eq: (_c, _l, args) => {
    if (args.length < 2) throw new TemplateError('wrong number of args for eq');
    return args.slice(1).some((b) => compare(args[0], b));
  },
  ne: (_c, _l, args) => (nargs('ne', args, 2), !compare(args[0], args[1])),
  not: (_c, _l, args) => (nargs('not', args, 1), !truthy(args[0])),
  dict: (_c, _l, args) => {
    if (args.length % 2) throw new TemplateError('dict needs key/value pairs');
    const out: Dict = {};
    for (let i = 0; i < args.length; i += 2) out[goString(args[i])] = args[i + 1];
    return out;
  },
  index: (_c, _l, args) => {
    if (args.length < 2) throw new TemplateError('wrong number of args for index');
    let v = args[0];
    for (const k of args.slice(1)) {
      if (Array.isArray(v)) {
        const i = int('index', k);
        if (i < 0 || i >= v.length) throw new TemplateError(`error calling index: index out of range: ${i}`);
        v = v[i];
      } else if (isDict(v)) v = v[goString(k)];
      else throw new TemplateError(`error calling index: cannot index ${goString(v)}`);
    }
    return v;
  },
};

/** The functions and keywords the engine knows: the template subset. */
export const SUPPORTED_FUNCTIONS = [...Object.keys(FUNCTIONS), 'and', 'or'].sort();

export function executeNamed(ctx: ExecContext, name: string, data: unknown): string {
  const nodes = ctx.templates.get(name);
  if (!nodes) throw new TemplateError(`${ctx.file}: no template "${name}"`);
  if (ctx.depth > 100) throw new TemplateError(`${ctx.file}: include nesting too deep at "${name}"`);
  const inner: ExecContext = { ...ctx, depth: ctx.depth + 1 };
  return new Executor(inner, data).run(nodes);
}

class Executor {
  private readonly scope: Scope = { vars: [] };

  constructor(
    private readonly ctx: ExecContext,
    root: unknown,
  ) {
    this.scope.vars.push({ name: '$', value: root });
  }

  run(nodes: Node[]): string {
    return this.list(nodes, this.lookup('$', 0));
  }

  private err(line: number, msg: string): TemplateError {
    return new TemplateError(`${this.ctx.file}:${line}: ${msg}`);
  }

  private lookup(name: string, line: number): unknown {
    for (let i = this.scope.vars.length - 1; i >= 0; i--) {
      const v = this.scope.vars[i] as { name: string; value: unknown };
      if (v.name === name) return v.value;
    }
    throw this.err(line, `undefined variable "${name}"`);
  }

  /** Runs `fn` with variables declared inside it dropped afterwards (Go scopes them to {{end}}). */
  private scoped<T>(fn: () => T): T {
    const mark = this.scope.vars.length;
    try {
      return fn();
    } finally {
      this.scope.vars.length = mark;
    }
  }

  private list(nodes: Node[], dot: unknown): string {
    let out = '';
    for (const node of nodes) out += this.node(node, dot);
    return out;
  }

  private node(node: Node, dot: unknown): string {
    switch (node.kind) {
      case 'text':
        return node.text;
      case 'action': {
        const v = this.pipeline(node.pipeline, dot);
        if (node.pipeline.decl) return '';
        // Helm renders a missing value as "" (missingkey=zero, "<no value>" dropped).
        return v === null || v === undefined ? '' : goString(v);
      }
      case 'template':
        return executeNamed(this.ctx, node.name, node.pipeline ? this.pipeline(node.pipeline, dot) : null);
      case 'if':
        return this.scoped(() => {
          for (const b of node.branches) if (truthy(this.pipeline(b.cond, dot))) return this.list(b.body, dot);
          return this.list(node.otherwise, dot);
        });
      case 'with':
        return this.scoped(() => {
          const v = this.pipeline(node.pipeline, dot);
          return truthy(v) ? this.list(node.body, v) : this.list(node.otherwise, dot);
        });
      case 'range':
        return this.scoped(() => this.range(node, dot));
    }
  }

  private range(node: Extract<Node, { kind: 'range' }>, dot: unknown): string {
    const decl = node.pipeline.decl;
    const v = this.pipeline({ ...node.pipeline, decl: undefined } as Pipeline, dot);
    let entries: [unknown, unknown][];
    if (v === null || v === undefined) entries = [];
    else if (Array.isArray(v)) entries = v.map((x, i) => [i, x]);
    // Go ranges over a map in sorted key order.
    else if (isDict(v))
      entries = Object.keys(v)
        .sort()
        .map((k) => [k, v[k]]);
    else throw this.err(node.pipeline.line, `range can't iterate over ${goString(v)}`);
    if (!entries.length) return this.list(node.otherwise, dot);
    let out = '';
    for (const [k, x] of entries) {
      out += this.scoped(() => {
        if (decl?.names.length === 2) {
          this.scope.vars.push({ name: decl.names[0] as string, value: k });
          this.scope.vars.push({ name: decl.names[1] as string, value: x });
        } else if (decl) this.scope.vars.push({ name: decl.names[0] as string, value: x });
        return this.list(node.body, x);
      });
    }
    return out;
  }

  private pipeline(p: Pipeline, dot: unknown): unknown {
    let value: unknown;
    let piped = false;
    for (const cmd of p.cmds) {
      value = this.command(cmd, dot, piped ? [value] : [], p.line);
      piped = true;
    }
    if (p.decl) {
      const name = p.decl.names[0] as string;
      if (p.decl.assign) {
        const slot = [...this.scope.vars].reverse().find((v) => v.name === name);
        if (!slot) throw this.err(p.line, `undefined variable "${name}"`);
        slot.value = value;
      } else this.scope.vars.push({ name, value });
    }
    return value;
  }

  private command(cmd: Command, dot: unknown, piped: unknown[], line: number): unknown {
    const [head, ...rest] = cmd.args;
    if (head?.kind === 'ident') {
      const name = head.name;
      try {
        // and/or stop at the first argument that decides, like Go's: later ones may not be evaluable.
        if (name === 'and' || name === 'or') {
          const thunks = [...rest.map((e) => () => this.expr(e, dot, line)), ...piped.map((v) => () => v)];
          if (!thunks.length) throw new TemplateError(`wrong number of args for ${name}`);
          let v: unknown;
          for (const t of thunks) {
            v = t();
            if (name === 'and' ? !truthy(v) : truthy(v)) return v;
          }
          return v;
        }
        const fn = Object.hasOwn(FUNCTIONS, name) ? FUNCTIONS[name] : undefined;
        if (!fn) throw new TemplateError(`function "${name}" not defined (not in the supported subset)`);
        const args = [...rest.map((e) => this.expr(e, dot, line)), ...piped];
        return fn({ ...this.ctx }, line, args);
      } catch (e) {
        if (
          e instanceof TemplateError &&
          !e.message.startsWith(this.ctx.file) &&
          !e.message.startsWith('execution error') &&
          !/^\S+:\d+: /.test(e.message)
        )
          throw this.err(line, `error calling ${name}: ${e.message}`);
        throw e;
      }
    }
    if (rest.length || piped.length) throw this.err(line, "can't give argument to non-function");
    return this.expr(head as Expr, dot, line);
  }

  private expr(e: Expr, dot: unknown, line: number): unknown {
    switch (e.kind) {
      case 'dot':
        return dot;
      case 'literal':
        return e.value;
      case 'var':
        return this.lookup(e.name, line);
      case 'pipe':
        return this.pipeline(e.pipeline, dot);
      case 'ident': {
        // A function used as an operand is called with no arguments.
        const fn = Object.hasOwn(FUNCTIONS, e.name) ? FUNCTIONS[e.name] : undefined;
        if (!fn) throw this.err(line, `function "${e.name}" not defined`);
        return fn(this.ctx, line, []);
      }
      case 'field': {
        const base = this.expr(e.base, dot, line);
        if (base === null || base === undefined) throw this.err(line, `nil pointer evaluating interface {}.${e.name}`);
        if (!isDict(base)) throw this.err(line, `can't evaluate field ${e.name} in ${goString(base)}`);
        return base[e.name];
      }
    }
  }
}
