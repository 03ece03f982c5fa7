/** An environment variable's value; unset and blank read alike, as undefined. */
export const fromEnv = (env: Record<string, string | undefined>, name: string): string | undefined => {
  const v = env[name];
  return v === undefined || v.trim() === '' ? undefined : v;
};
