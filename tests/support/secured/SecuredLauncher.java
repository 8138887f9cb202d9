package refdata.secured;

import java.io.InputStream;
import java.lang.management.ManagementFactory;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Collection;
import java.util.Collections;
import java.util.Comparator;
import java.util.List;
import java.util.stream.Stream;

import org.opensearch.Version;
import org.opensearch.cluster.service.ClusterService;
import org.opensearch.common.settings.Settings;
import org.opensearch.env.Environment;
import org.opensearch.http.HttpServerTransport;
import org.opensearch.node.InternalSettingsPreparer;
import org.opensearch.node.Node;
import org.opensearch.plugins.PluginInfo;

/**
 * The secured test node: the engine launcher's single-node cluster (tests/support/engine/EngineLauncher.java) with the
 * OpenSearch security plugin as one more classpath plugin. Its settings, transport certificates and initial security
 * configuration are in DATA_DIR/config (tests/support/secured_node.py writes them; the node reads opensearch.yml).
 *
 * Usage: SecuredLauncher DATA_DIR. Ready is the plugin's own health saying UP (its security index created and
 * loaded; before that every request answers 503); then one line on stdout,
 * {@code ready port=<port> version=<version> cpu_ms=<process CPU time>}. When its standard input closes it stops the
 * node and deletes DATA_DIR.
 */
public final class SecuredLauncher {

    private static final List<String> PLUGINS = List.of(
        "org.opensearch.transport.Netty4ModulePlugin",
        "org.opensearch.painless.PainlessModulePlugin",
        "org.opensearch.analysis.common.CommonAnalysisModulePlugin",
        "org.opensearch.geo.GeoModulePlugin",
        "org.opensearch.index.mapper.MapperExtrasModulePlugin",
        "org.opensearch.index.reindex.ReindexModulePlugin",
        "org.opensearch.security.OpenSearchSecurityPlugin"
    );

    static final class ClasspathNode extends Node {
        ClasspathNode(Environment environment, Collection<PluginInfo> plugins) {
            super(environment, plugins, true);
        }

        @Override
        protected void configureNodeAndClusterIdStateListener(ClusterService clusterService) {
            // A single node in a throw-away JVM: nothing reads the node and cluster ids from the logs.
        }
    }

    private SecuredLauncher() {}

    public static void main(String[] args) throws Exception {
        if (args.length != 1) {
            System.err.println("usage: SecuredLauncher DATA_DIR");
            System.exit(2);
        }
        Path home = Path.of(args[0]).toAbsolutePath();
        Settings settings = Settings.builder()
            .put("cluster.name", "refdata-tests-secured")
            .put("node.name", "secured")
            .put("path.home", home.toString())
            .put("path.data", home.resolve("data").toString())
            .put("path.logs", home.resolve("logs").toString())
            .put("network.host", "127.0.0.1")
            .put("http.port", "0")
            .put("transport.port", "0")
            .put("discovery.type", "single-node")
            .put("cluster.routing.allocation.disk.threshold_enabled", false)
            .build();
        Environment environment = InternalSettingsPreparer.prepareEnvironment(
            settings, Collections.emptyMap(), home.resolve("config"), () -> "secured");
        List<PluginInfo> plugins = PLUGINS.stream().map(SecuredLauncher::classpathPlugin).toList();
        Node node = new ClasspathNode(environment, plugins);
        node.start();
        int port = node.injector().getInstance(HttpServerTransport.class).boundAddress().publishAddress().getPort();
        HttpClient http = HttpClient.newHttpClient();
        HttpRequest health = HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + "/_plugins/_security/health"))
            .build();
        while (true) {
            HttpResponse<String> answer = http.send(health, HttpResponse.BodyHandlers.ofString());
            if (answer.statusCode() == 200 && answer.body().contains("\"UP\"")) {
                break;
            }
            Thread.sleep(50);
        }
        long cpuMillis = ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean())
            .getProcessCpuTime() / 1_000_000;
        System.out.println("ready port=" + port + " version=" + Version.CURRENT + " cpu_ms=" + cpuMillis);
        System.out.flush();
        InputStream in = System.in;
        byte[] buffer = new byte[256];
        while (in.read(buffer) >= 0) {
            // Nothing is read from the parent; its end of the pipe closing is the signal to stop.
        }
        node.close();
        try (Stream<Path> paths = Files.walk(home)) {
            for (Path path : paths.sorted(Comparator.reverseOrder()).toList()) {
                Files.deleteIfExists(path);
            }
        }
        System.exit(0);
    }

    private static PluginInfo classpathPlugin(String className) {
        return new PluginInfo(
            className, "classpath plugin", "NA", Version.CURRENT, Integer.toString(Runtime.version().feature()),
            className, Collections.emptyList(), false);
    }
}
