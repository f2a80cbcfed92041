-- The indexes of a page of a tenant's sessions (the console's list): its
-- count reads only (tenant, deleted_at, kind), and the default order, the
-- most recently updated first, walks (tenant, updated_at) instead of
-- sorting every session of the tenant.

CREATE INDEX sessions_tenant_live_kind ON sessions (tenant, deleted_at, kind);
CREATE INDEX sessions_tenant_updated ON sessions (tenant, updated_at);
