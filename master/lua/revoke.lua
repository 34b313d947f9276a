-- Recovery of a batch left by an older leader (master/staging.py): revoke the domain's landing marker unless it
-- was claimed already. The marker is the single decision per (batch, domain).
-- KEYS: marker. ARGV: ttl. Reply: the marker's decision ('landed' or 'revoked').
redis.call('SET', KEYS[1], 'revoked', 'NX', 'EX', ARGV[1])
return redis.call('GET', KEYS[1])
