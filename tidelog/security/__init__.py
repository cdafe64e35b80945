"""Security: TLS listeners, SASL authentication and ACL authorization with Kafka's config names and semantics.

`listener_config` resolves a listener's settings (`listener.name.<l>.*` overrides; `jaas` parses its
`sasl.jaas.config`), `ssl_context` builds the stdlib SSLContext, `sasl/` holds the mechanism servers,
`authenticator` drives a connection's authentication phase, `scram_store`/`acl_store` keep credentials and ACLs
durable (`acl` holds Kafka's ACL enums, all the handlers need without an authorizer), `authorizer` is Kafka's
StandardAuthorizer.
"""
