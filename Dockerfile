# One image for every service; the argument picks which one runs:
#   docker build -t dws:0.1.0 .
#   docker run dws:0.1.0 services/scheduler/src/bin.ts      (gateway by default)
# The services run from TypeScript through tsx: there is no compile step.

ARG NODE_IMAGE=node:20-bookworm-slim

FROM ${NODE_IMAGE} AS deps
WORKDIR /app
RUN npm install -g pnpm@10.34.8
# The store is filled from the lockfile alone, so this layer outlives source edits.
COPY pnpm-lock.yaml pnpm-workspace.yaml ./
COPY patches ./patches
RUN pnpm fetch --prod
COPY . .
# Production dependencies only: no jest, swc, buf, eslint, typescript, testcontainers.
RUN pnpm install --prod --frozen-lockfile --offline
# tsx is a root devDependency, so --prod leaves it out: install the lockfile's version on
# its own (apps/deploy-check checks that this ARG matches pnpm-lock.yaml).
ARG TSX_VERSION=4.23.15
RUN npm install --prefix /opt/tsx --no-save --no-audit --no-fund "tsx@${TSX_VERSION}" \
 && ln -s /opt/tsx/node_modules/tsx node_modules/tsx
# What a service never loads: tests, benchmarks, examples, docs, tooling.
RUN rm -rf .git test-e2e bench examples docs deploy scripts proto patches apps/deploy-check \
      libs/*/test services/*/test \
 && find libs services apps -name '*.test.ts' -delete

FROM ${NODE_IMAGE}
ENV NODE_ENV=production \
    HOST=0.0.0.0
WORKDIR /app
COPY --from=deps /opt/tsx /opt/tsx
COPY --from=deps /app /app
# The base image's unprivileged `node` user, by uid so Kubernetes can check runAsNonRoot.
USER 1000:1000
EXPOSE 8288
# node itself is PID 1 (not pnpm), so SIGTERM reaches the service and it drains.
ENTRYPOINT ["node", "--import", "tsx"]
CMD ["services/gateway/src/bin.ts"]
