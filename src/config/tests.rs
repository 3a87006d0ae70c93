//! The config layering and checks.

use super::*;

#[test]
fn empty_config_is_embedded_on_default_port() {
    let config = Config::from_toml("").unwrap();
    config.validate().unwrap();
    assert_eq!(
        config.store.kind().unwrap(),
        StoreKind::Embedded(PathBuf::from("./data"))
    );
    assert_eq!(config.server.listen.port(), 50051);
}

#[test]
fn the_default_file_is_read_only_when_nothing_names_one() {
    let dir = tempfile::tempdir().unwrap();
    let default = dir.path().join("agentd.toml");
    let cli = Cli::default();
    let none = Config::load_with_default(&cli, &default).unwrap();
    assert!(none.source.is_none() && none.agents.is_empty());
    std::fs::write(&default, "[limits]\nmax_tasks = 9\n").unwrap();
    let read = Config::load_with_default(&cli, &default).unwrap();
    assert_eq!(read.limits.max_tasks, 9);
    assert_eq!(read.source.as_deref(), Some(default.as_path()));
    let named = dir.path().join("other.toml");
    std::fs::write(&named, "[limits]\nmax_tasks = 3\n").unwrap();
    let cli = Cli {
        config: Some(named),
        ..Cli::default()
    };
    assert_eq!(
        Config::load_with_default(&cli, &default)
            .unwrap()
            .limits
            .max_tasks,
        3
    );
}

#[test]
fn missing_provider_keys_are_named_unless_optional() {
    let text = r#"
        [[providers]]
        name = "a"
        base_url = "http://x/v1"
        api_key_env = "SURELY_UNSET_TEST_KEY_A"
        [[providers]]
        name = "b"
        base_url = "http://x/v1"
        api_key_env = "SURELY_UNSET_TEST_KEY_B"
        optional = true
        [[providers]]
        name = "c"
        base_url = "http://x/v1"
    "#;
    let missing = Config::from_toml(text).unwrap().missing_provider_keys();
    assert_eq!(missing.len(), 1);
    assert!(
        missing[0].contains("provider \"a\"") && missing[0].contains("SURELY_UNSET_TEST_KEY_A")
    );
}

#[test]
fn flags_override_file() {
    let mut config = Config::from_toml("[store]\nurl = \"redis://a:6379\"\n").unwrap();
    let cli = Cli {
        store_url: Some("embedded".into()),
        max_tasks: Some(7),
        ..Cli::default()
    };
    config.apply(&cli);
    assert_eq!(config.store.url, "embedded");
    assert_eq!(config.limits.max_tasks, 7);
}

#[test]
fn every_file_setting_has_an_env_override() {
    let config = Config::default();
    let sections = [
        ("server", toml::Value::try_from(&config.server)),
        ("store", toml::Value::try_from(&config.store)),
        ("log", toml::Value::try_from(&config.log)),
        ("auth", toml::Value::try_from(&config.auth)),
        ("limits", toml::Value::try_from(&config.limits)),
    ];
    // Nested tables (`server.tls`) count by their own keys.
    fn keys(prefix: &str, value: &toml::Value, out: &mut Vec<String>) {
        for (key, value) in value.as_table().unwrap() {
            let key = format!("{prefix}.{key}");
            match value {
                toml::Value::Table(_) => keys(&key, value, out),
                _ => out.push(key),
            }
        }
    }
    for (section, value) in sections {
        let mut found = Vec::new();
        keys(section, &value.unwrap(), &mut found);
        for key in found {
            // Tables of their own, like providers and agents: the file only (tenant keys and
            // the JWT secret still come from variables the file names).
            if ["auth.tenants", "auth.jwt"].contains(&key.as_str()) {
                continue;
            }
            assert!(
                OVERRIDES.iter().any(|(k, _)| *k == key),
                "{key} has no AGENTD_* override"
            );
        }
    }
    assert!(OVERRIDES.iter().all(|(_, env)| env.starts_with("AGENTD_")));
    for key in [
        "limits.max_messages",
        "limits.max_log_chunks",
        "auth.api_key_sha256",
        "server.tls.cert_file",
        "server.tls.key_file",
        "server.tls.client_ca_file",
    ] {
        assert!(OVERRIDES.iter().any(|(k, _)| *k == key), "{key}");
    }
}

#[test]
fn new_overrides_parse_and_apply() {
    let digest = "ab".repeat(32);
    let list = format!(" {digest} , {digest},");
    let cli = Cli::try_parse_from([
        "agentd",
        "--max-messages",
        "5",
        "--max-log-chunks",
        "7",
        "--api-key-sha256",
        &list,
    ])
    .unwrap();
    let mut config = Config::from_toml("[limits]\nmax_messages = 3\n").unwrap();
    config.apply(&cli);
    assert_eq!(config.limits.max_messages, 5);
    assert_eq!(config.limits.max_log_chunks, 7);
    assert_eq!(config.auth.api_key_sha256, [digest.clone(), digest]);
    config.validate().unwrap();
    let untouched = Config::default();
    let mut applied = Config::default();
    applied.apply(&Cli::default());
    assert_eq!(applied.limits.max_messages, untouched.limits.max_messages);
}

#[test]
fn bad_digests_fail_validation_with_the_servers_text() {
    let config = Config::from_toml("[auth]\napi_key_sha256 = [\"zz\"]\n").unwrap();
    let err = config.validate().unwrap_err().to_string();
    assert_eq!(
        err,
        "invalid config: auth.api_key_sha256: \"zz\" is not 64 hex digits"
    );
}

#[test]
fn unknown_fields_are_rejected() {
    let err = Config::from_toml("[server]\nlisten_addr = \"x\"\n").unwrap_err();
    assert!(err.to_string().contains("listen_addr"), "{err}");
}

#[test]
fn agents_must_name_known_providers_and_tools() {
    let text = r#"
        [[providers]]
        name = "openai"
        base_url = "https://api.openai.com/v1"
        api_key_env = "OPENAI_API_KEY"
        [[agents]]
        id = "a"
        model = "other/gpt"
    "#;
    let err = Config::from_toml(text).unwrap().validate().unwrap_err();
    assert!(err.to_string().contains("configured provider"), "{err}");
    let ok = text.replace("other/gpt", "openai/gpt");
    Config::from_toml(&ok).unwrap().validate().unwrap();
    let bad_tool = format!("{ok}\ntools = [\"shell\"]\n");
    let err = Config::from_toml(&bad_tool)
        .unwrap()
        .validate()
        .unwrap_err();
    assert!(err.to_string().contains("unknown tool set"), "{err}");
}

#[test]
fn bad_store_url_is_rejected_without_leaking_credentials() {
    let config = StoreConfig {
        url: "mysql://user:secret@db".into(),
        data_dir: PathBuf::new(),
        ..StoreConfig::default()
    };
    let err = config.kind().unwrap_err().to_string();
    assert!(!err.contains("secret"), "{err}");
}

#[test]
fn cluster_and_sentinel_urls_are_checked_at_start_up() {
    let with = |url: &str, wait_replicas: u32, wait_timeout_ms: u64| StoreConfig {
        url: url.into(),
        wait_replicas,
        wait_timeout_ms,
        ..StoreConfig::default()
    };
    for url in [
        "redis+cluster://a:7000,b:7001",
        "rediss+cluster://u:p@a:7000",
        "redis+sentinel://s1:26379,s2:26379/mymaster/1",
    ] {
        assert_eq!(
            with(url, 0, 500).kind().unwrap(),
            StoreKind::Redis(url.into())
        );
    }
    for (config, says) in [
        (with("redis+cluster://u:secret@a", 0, 500), "needs a port"),
        (
            with("redis+sentinel://u:secret@s:26379", 0, 500),
            "names the master",
        ),
        (
            with("redis+cluster://a:7000", 1, 500),
            "store.wait_replicas",
        ),
        (with("redis://a:6379", 1, 0), "store.wait_timeout_ms"),
    ] {
        let err = config.kind().unwrap_err().to_string();
        assert!(err.contains(says), "{err}");
        assert!(!err.contains("secret"), "{err}");
    }
    assert!(with("redis+sentinel://s:26379/m", 1, 200).kind().is_ok());
}

#[test]
fn store_cache_is_set_by_file_and_flag_and_bounded() {
    assert_eq!(Config::default().store.cache_mb, 64);
    assert_eq!(Config::default().store.cache_bytes(), 64 << 20);
    let config = Config::from_toml("[store]\ncache_mb = 16\n").unwrap();
    assert_eq!(config.store.cache_bytes(), 16 << 20);
    let cli = Cli::try_parse_from(["agentd", "--store-cache-mb", "8"]).unwrap();
    let mut applied = config.clone();
    applied.apply(&cli);
    assert_eq!(applied.store.cache_mb, 8);
    applied.validate().unwrap();
    for bad in [0, (1 << 20) + 1] {
        let mut config = Config::default();
        config.store.cache_mb = bad;
        let err = config.validate().unwrap_err().to_string();
        assert!(err.contains("store.cache_mb"), "{err}");
        assert!(err.contains(&bad.to_string()), "{err}");
    }
}

#[test]
fn store_sync_is_for_the_embedded_store() {
    let config = Config::from_toml("[store]\nsync = \"always\"\n").unwrap();
    assert_eq!(config.store.sync, StoreSync::Always);
    assert!(matches!(config.store.kind(), Ok(StoreKind::Embedded(_))));
    let cli = Cli::try_parse_from(["agentd", "--store-sync", "batch"]).unwrap();
    let mut applied = config.clone();
    applied.apply(&cli);
    assert_eq!(applied.store.sync, StoreSync::Batch);
    let redis = StoreConfig {
        url: "redis://a:6379".into(),
        sync: StoreSync::Always,
        ..StoreConfig::default()
    };
    let err = redis.kind().unwrap_err().to_string();
    assert!(err.contains("store.sync"), "{err}");
    let bad = Config::from_toml("[store]\nsync = \"sometimes\"\n");
    assert!(bad.is_err());
}
