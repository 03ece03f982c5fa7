/**
 * Steps the test holds open until it says so, by name (made on first use): a
 * run stays inside its step (executing, holding its concurrency slot) while
 * the test looks at it. `openAll` ends what a failed test left held.
 */
export class Gates {
  private readonly gates = new Map<string, { wait: Promise<void>; open: () => void }>();
  private gate(key: string) {
    let g = this.gates.get(key);
    if (!g) {
      let open!: () => void;
      const wait = new Promise<void>((resolve) => (open = resolve));
      g = { wait, open };
      this.gates.set(key, g);
    }
    return g;
  }
  wait(key: string): Promise<void> {
    return this.gate(key).wait;
  }
  open(key: string): void {
    this.gate(key).open();
  }
  openAll(): void {
    for (const g of this.gates.values()) g.open();
  }
}
