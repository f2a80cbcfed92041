-- The indexes of a page of a tenant's sessions in another order than the
-- default: each walks the tenant's sessions in its column's order, then
-- the id's (the page's tie break), so that a page is read in order and the
-- database stops at its end instead of sorting every session that passes
-- the filters. The entry count, which every append changes, has none.

CREATE INDEX sessions_tenant_label_id ON sessions (tenant, label, id);
CREATE INDEX sessions_tenant_created_id ON sessions (tenant, created_at, id);
CREATE INDEX sessions_tenant_model_id ON sessions (tenant, model, id);
CREATE INDEX sessions_tenant_state_id ON sessions (tenant, state, id);
-- By namespace: a tenant's sessions in the order of their ids.
CREATE INDEX sessions_tenant_id ON sessions (tenant, id);
