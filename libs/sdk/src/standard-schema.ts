/**
 * The Standard Schema interface (https://standardschema.dev), declared here
 * so zod, valibot, arktype and friends validate event data without the SDK
 * depending on any of them. Only what the SDK reads is declared.
 */
export interface StandardSchemaV1<Input = unknown, Output = Input> {
  readonly '~standard': {
    readonly version: 1;
    readonly vendor: string;
    readonly validate: (value: unknown) => StandardResult<Output> | Promise<StandardResult<Output>>;
    readonly types?: { readonly input: Input; readonly output: Output } | undefined;
  };
}

export type StandardResult<Output> =
  | { readonly value: Output; readonly issues?: undefined }
  | { readonly issues: ReadonlyArray<StandardIssue> };

export interface StandardIssue {
  readonly message: string;
  readonly path?: ReadonlyArray<PropertyKey | { readonly key: PropertyKey }> | undefined;
}

/** The output type of a Standard Schema (read from its `types`, as the spec prescribes). */
export type InferSchemaOutput<S extends StandardSchemaV1> = NonNullable<S['~standard']['types']>['output'];

/** True for anything that implements Standard Schema v1. */
export function isStandardSchema(v: unknown): v is StandardSchemaV1 {
  const std = (v as { '~standard'?: { version?: unknown; validate?: unknown } } | null | undefined)?.['~standard'];
  return typeof std === 'object' && std !== null && std.version === 1 && typeof std.validate === 'function';
}

/** One line per issue: `data.user.email: Invalid email` (`root` names what was validated). */
export function formatIssues(issues: ReadonlyArray<StandardIssue>, root = 'data'): string {
  return issues
    .slice(0, 10)
    .map((i) => {
      const path = (i.path ?? []).map((p) => String(typeof p === 'object' && p !== null ? p.key : p));
      return path.length ? `${root}.${path.join('.')}: ${i.message}` : i.message;
    })
    .join('; ');
}
