// drizzle-orm/pg-core's table builders for services' `store/schema.ts`,
// re-exported for the same reason as ./orm.ts.
export * from 'drizzle-orm/pg-core';
