package refdata.engine;

import java.io.IOException;
import java.io.InputStream;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
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
 * One single-node OpenSearch cluster for the test suite, in this JVM: the modules a domain ships that the platform
 * uses are loaded from the classpath. The same source runs both test node kinds, compiled against each one's jars
 * (tests/support/engine_setup.py): the engine (tests/support/engine/pom.xml) and the secured node
 * (tests/support/secured/pom.xml), whose classpath also holds the security plugin, loaded whenever it is there. The
 * secured node's settings, transport certificates and initial security configuration are in HOME_DIR/config
 * (tests/support/secured_node.py writes them; the node reads opensearch.yml).
 *
 * Usage: NodeLauncher HOME_DIR. HTTP binds 127.0.0.1 on an ephemeral port. Ready is the cluster's health at least
 * yellow, or with the security plugin its own health saying UP (its security index created and loaded; before that
 * every request answers 503); then the launcher prints one line, {@code ready port=<port> version=<version>}, on
 * stdout. It stops the node, deletes HOME_DIR and exits when its standard input closes, so neither the node nor its
 * data outlives the test process that started it.
 */
public final class NodeLauncher {

    private static final List<String> MODULES = List.of(
        "org.opensearch.transport.Netty4ModulePlugin",
        "org.opensearch.painless.PainlessModulePlugin",
        "org.opensearch.analysis.common.CommonAnalysisModulePlugin",
        "org.opensearch.geo.GeoModulePlugin",
        "org.opensearch.index.mapper.MapperExtrasModulePlugin",
        "org.opensearch.index.reindex.ReindexModulePlugin"
    );
    private static final String SECURITY_PLUGIN = "org.opensearch.security.OpenSearchSecurityPlugin";

    /** A node whose plugins are classes on the classpath, as the engine's own in-JVM test nodes do. */
    static final class ClasspathNode extends Node {
        ClasspathNode(Environment environment, Collection<PluginInfo> plugins) {
            super(environment, plugins, true);
        }

        @Override
        protected void configureNodeAndClusterIdStateListener(ClusterService clusterService) {
            // A single node in a throw-away JVM: nothing reads the node and cluster ids from the logs.
        }
    }

    private NodeLauncher() {}

    public static void main(String[] args) throws Exception {
        if (args.length != 1) {
            System.err.println("usage: NodeLauncher HOME_DIR");
            System.exit(2);
        }
        Path home = Path.of(args[0]).toAbsolutePath();
        Files.createDirectories(home.resolve("config"));
        boolean secured = onClasspath(SECURITY_PLUGIN);
        String name = secured ? "secured" : "engine";
        Settings settings = Settings.builder()
            .put("cluster.name", "refdata-tests-" + name)
            .put("node.name", name)
            .put("path.home", home.toString())
            .put("path.data", home.resolve("data").toString())
            .put("path.logs", home.resolve("logs").toString())
            .put("network.host", "127.0.0.1")
            .put("http.port", "0")
            .put("transport.port", "0")
            .put("discovery.type", "single-node")
            // The data directory is a temp dir on a shared disk: the disk watermarks would block writes at random.
            .put("cluster.routing.allocation.disk.threshold_enabled", false)
            .build();
        Environment environment = InternalSettingsPreparer.prepareEnvironment(
            settings, Collections.emptyMap(), home.resolve("config"), () -> name);
        List<String> plugins = new ArrayList<>(MODULES);
        if (secured) {
            plugins.add(SECURITY_PLUGIN);
        }
        Node node = new ClasspathNode(environment, plugins.stream().map(NodeLauncher::classpathPlugin).toList());
        node.start();
        int port = node.injector().getInstance(HttpServerTransport.class).boundAddress().publishAddress().getPort();
        if (secured) {
            waitForSecurity(port);
        } else {
            node.client().admin().cluster().prepareHealth().setWaitForYellowStatus().get();
        }
        System.out.println("ready port=" + port + " version=" + Version.CURRENT);
        System.out.flush();
        waitForEndOfInput(System.in);
        node.close();
        try (Stream<Path> paths = Files.walk(home)) {
            for (Path path : paths.sorted(Comparator.reverseOrder()).toList()) {
                Files.deleteIfExists(path);
            }
        }
        System.exit(0);
    }

    private static boolean onClasspath(String className) {
        try {
            Class.forName(className, false, NodeLauncher.class.getClassLoader());
            return true;
        } catch (ClassNotFoundException absent) {
            return false;
        }
    }

    private static PluginInfo classpathPlugin(String className) {
        return new PluginInfo(
            className, "classpath plugin", "NA", Version.CURRENT, Integer.toString(Runtime.version().feature()),
            className, Collections.emptyList(), false);
    }

    private static void waitForSecurity(int port) throws IOException, InterruptedException {
        HttpClient http = HttpClient.newHttpClient();
        HttpRequest health = HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + "/_plugins/_security/health"))
            .build();
        while (true) {
            HttpResponse<String> answer = http.send(health, HttpResponse.BodyHandlers.ofString());
            if (answer.statusCode() == 200 && answer.body().contains("\"UP\"")) {
                return;
            }
            Thread.sleep(50);
        }
    }

    private static void waitForEndOfInput(InputStream in) throws IOException {
        byte[] buffer = new byte[256];
        while (in.read(buffer) >= 0) {
            // Nothing is read from the parent; its end of the pipe closing is the signal to stop.
        }
    }
}
