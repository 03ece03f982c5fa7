# One image for every service; the argument picks which one runs:
#   docker build -t dws:0.1.0 .
#   docker run dws:0.1.0 dist/services/scheduler/bin.js      (gateway by default)
# The services run as esbuild bundles on plain node (scripts/build.mjs): no tsx, no
# TypeScript at run time.

ARG NODE_IMAGE=node:20-bookworm-slim

FROM ${NODE_IMAGE} AS source
WORKDIR /app
RUN npm install -g pnpm@10.34.8
# The store is filled from the lockfile alone, so this layer outlives source edits.
COPY pnpm-lock.yaml pnpm-workspace.yaml ./
COPY patches ./patches
RUN pnpm fetch
COPY . .

# Every dependency (esbuild is a devDependency), then the bundles into dist/. No install
# scripts: the console is built in the deps stage, and esbuild needs none.
FROM source AS build
RUN pnpm install --frozen-lockfile --offline --ignore-scripts \
 && node scripts/build.mjs

# Production dependencies only: no jest, swc, buf, eslint, typescript, tsx, esbuild.
FROM source AS deps
RUN pnpm install --prod --frozen-lockfile --offline
# What a service never loads: tests, benchmarks, examples, docs, tooling, and the TypeScript
# the bundles were made from. Kept: each service's store/migrations, libs/db's
# pglite-init.mjs, the built console and node_modules (PGlite's wasm), which the bundles
# find relative to the tree (scripts/build.mjs).
RUN rm -rf .git dist test-e2e bench examples docs deploy scripts proto patches apps/deploy-check \
      libs/*/test services/*/test \
 && find libs services apps -name node_modules -prune -o -name '*.ts' -type f -print | xargs rm -f

FROM ${NODE_IMAGE}
# jemalloc instead of glibc's malloc: glibc keeps the freed holes of its main heap resident, and
# which socket read buffers and compiler zones happened to be live at a service's busiest moment
# decided whether the scheduler held 10 or 40 MiB of them for good (140-169 MiB after W2 on glibc,
# 138-147 with it). narenas:2 as MALLOC_ARENA_MAX=2 for glibc (kept for an image built without
# the preload): fewer arenas holding freed memory. docs/deploy.md "Memory".
RUN apt-get update \
 && apt-get install -y --no-install-recommends libjemalloc2 \
 && rm -rf /var/lib/apt/lists/* \
 && ln -s "$(dpkg -L libjemalloc2 | grep '/libjemalloc.so.2$')" /usr/local/lib/libjemalloc.so.2
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    LD_PRELOAD=/usr/local/lib/libjemalloc.so.2 \
    MALLOC_CONF=narenas:2 \
    MALLOC_ARENA_MAX=2
WORKDIR /app
COPY --from=deps /app /app
COPY --from=build /app/dist /app/dist
# The base image's unprivileged `node` user, by uid so Kubernetes can check runAsNonRoot.
USER 1000:1000
EXPOSE 8288
# node itself is PID 1 (not pnpm), so SIGTERM reaches the service and it drains.
# NODE_OPTIONS=--enable-source-maps maps stack traces to the TypeScript sources' lines.
# The young generation as package.json's start scripts set it: Node 20's and 22's own size, which
# Node 24 quadruples (RSS ~230 MiB after W2 where it is ~140; docs/deploy.md "Memory").
ENTRYPOINT ["node", "--max-semi-space-size=16"]
CMD ["dist/services/gateway/bin.js"]
