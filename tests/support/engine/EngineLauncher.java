package refdata.engine;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Collection;
import java.util.Collections;
import java.util.Comparator;
import java.util.List;
import java.util.stream.Collectors;
import java.util.stream.Stream;

import org.opensearch.Version;
import org.opensearch.cluster.service.ClusterService;
import org.opensearch.common.settings.Settings;
import org.opensearch.env.Environment;
import org.opensearch.http.HttpServerTransport;
import org.opensearch.node.InternalSettingsPreparer;
import org.opensearch.node.Node;
import org.opensearch.plugins.Plugin;
import org.opensearch.plugins.PluginInfo;

/**
 * One single-node OpenSearch cluster for the test suite, in this JVM: the modules a domain ships that the platform
 * uses are loaded from the classpath (tests/support/engine/pom.xml pins them; engine.lock their checksums).
 *
 * Usage: EngineLauncher HOME_DIR. HTTP binds 127.0.0.1 on an ephemeral port; when the cluster is ready the launcher
 * prints one line, {@code ready port=<port> version=<version>}, on stdout. It stops the node, deletes HOME_DIR and
 * exits when its standard input closes, so neither the node nor its data outlives the test process that started it.
 */
public final class EngineLauncher {

    private static final List<String> MODULES = List.of(
        "org.opensearch.transport.Netty4ModulePlugin",
        "org.opensearch.painless.PainlessModulePlugin",
        "org.opensearch.analysis.common.CommonAnalysisModulePlugin",
        "org.opensearch.geo.GeoModulePlugin",
        "org.opensearch.index.mapper.MapperExtrasModulePlugin",
        "org.opensearch.index.reindex.ReindexModulePlugin"
    );

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

    private EngineLauncher() {}

    public static void main(String[] args) throws Exception {
        if (args.length != 1) {
            System.err.println("usage: EngineLauncher HOME_DIR");
            System.exit(2);
        }
        Path home = Path.of(args[0]).toAbsolutePath();
        Files.createDirectories(home.resolve("config"));
        Settings settings = Settings.builder()
            .put("cluster.name", "refdata-tests")
            .put("node.name", "engine")
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
            settings, Collections.emptyMap(), home.resolve("config"), () -> "engine");
        List<PluginInfo> plugins = MODULES.stream().map(EngineLauncher::classpathPlugin).collect(Collectors.toList());
        Node node = new ClasspathNode(environment, plugins);
        node.start();
        node.client().admin().cluster().prepareHealth().setWaitForYellowStatus().get();
        int port = node.injector().getInstance(HttpServerTransport.class).boundAddress().publishAddress().getPort();
        System.out.println("ready port=" + port + " version=" + Version.CURRENT);
        System.out.flush();
        waitForEndOfInput(System.in);
        node.close();
        deleteRecursively(home);
        System.exit(0);
    }

    private static PluginInfo classpathPlugin(String className) {
        return new PluginInfo(
            className, "classpath module", "NA", Version.CURRENT, Integer.toString(Runtime.version().feature()),
            className, Collections.emptyList(), false);
    }

    private static void deleteRecursively(Path directory) throws IOException {
        try (Stream<Path> paths = Files.walk(directory)) {
            for (Path path : paths.sorted(Comparator.reverseOrder()).collect(Collectors.toList())) {
                Files.deleteIfExists(path);
            }
        }
    }

    private static void waitForEndOfInput(InputStream in) throws IOException {
        byte[] buffer = new byte[256];
        while (in.read(buffer) >= 0) {
            // Nothing is read from the parent; its end of the pipe closing is the signal to stop.
        }
    }
}
