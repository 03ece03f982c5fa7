// drizzle-orm's operators and `sql`, re-exported so services use the very copy
// @dws/db runs on (a second copy of drizzle-orm has incompatible class types).
export * from 'drizzle-orm';
